// FUSE connections as the kernel lists them in /sys/fs/fuse/connections (the kernel's
// Documentation/filesystems/fuse.rst, "Control filesystem"): one directory per mounted FUSE file
// system, named after the minor of its device number, holding the number of requests waiting and
// the background-queue limits.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/result.h"
#include "host/host_fs.h"

namespace gpud::host {

inline constexpr const char* kFuseConnectionsDir = "/sys/fs/fuse/connections";

struct FuseConnection {
  std::string id;  // the directory name: the mount's device number (mountinfo "0:<id>")
  std::optional<uint64_t> waiting;               // requests queued or being processed
  std::optional<uint64_t> congestion_threshold;  // background requests that mark it congested
  std::optional<uint64_t> max_background;        // background requests allowed at once
  std::string error;  // the files that were missing or garbled, named; "" when all were read
  // From the mount table (0:<id> with a fuse file system type); "" when not found there.
  std::string mount_point;
  std::string source;   // the mount's source, e.g. "sshfs" or "user@host:/data"
  std::string fs_type;  // e.g. "fuse.sshfs"
};

struct FuseConnections {
  bool control_fs_present = false;          // the directory exists (the fuse module is loaded)
  std::vector<FuseConnection> connections;  // sorted by id, numerically
};

// Reads every connection's `waiting`, `congestion_threshold` and `max_background`, and names each
// from the mount table `mountinfo` (text of /proc/self/mountinfo; "" to skip). A missing
// connections directory is no FUSE (control_fs_present false), not an error; an unreadable one is.
Result<FuseConnections> read_fuse_connections(const HostFs& fs, const std::string& mountinfo);

}  // namespace gpud::host
