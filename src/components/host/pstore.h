// Kernel panics kept by pstore: the kernel writes its last messages to persistent storage when it
// panics, and systemd-pstore copies them at the next boot to /var/lib/systemd/pstore/<id>/
// (dmesg.txt); without systemd-pstore they stay in /sys/fs/pstore (dmesg-<backend>-<n>). The os
// component imports each panic found there as a "kernel_panic" event at start, as GPUd does
// (components/os, pkg/pstore), so a node that rebooted from a panic says so although the panic
// never reached the log gpud follows.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "core/health.h"
#include "host/host_fs.h"

namespace gpud::components {

// Where pstore records are looked for, under the host root.
inline constexpr const char* kSystemdPstoreDir = "/var/lib/systemd/pstore";
inline constexpr const char* kSysfsPstoreDir = "/sys/fs/pstore";

struct PstoreLimits {
  std::chrono::hours lookback{72};  // GPUd's: files older than this are not read
  int max_depth = 3;                // directories below the pstore dir (GPUd's)
  size_t max_files = 256;
  size_t max_file_bytes = 1 << 20;  // a record is a few tens of KiB
};

// The kernel panics in the pstore records under `fs` whose file changed within limits.lookback of
// `now`: one os event per panic (name "kernel_panic", type Warning), timed by its file's
// modification time (when the record was written: the panic, or the copy at the next boot),
// with the file and the panic's first line in extra_info. Unreadable or oversized files and
// directories are skipped; nothing here fails.
std::vector<Event> pstore_panic_events(const host::HostFs& fs, TimePoint now,
                                       const PstoreLimits& limits = {});

}  // namespace gpud::components
