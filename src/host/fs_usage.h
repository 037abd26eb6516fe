// statvfs(2) of one mount point under the host root, as byte counts the disk component reports.
#pragma once

#include <sys/statvfs.h>

#include <chrono>
#include <cstdint>
#include <string_view>

#include "core/result.h"
#include "host/host_fs.h"
#include "host/mount_call.h"

namespace gpud::host {

struct FsUsage {
  uint64_t total_bytes = 0;      // f_blocks * f_frsize
  uint64_t free_bytes = 0;       // f_bfree * f_frsize (including blocks reserved for root)
  uint64_t available_bytes = 0;  // f_bavail * f_frsize (what an unprivileged user can still write)
  uint64_t used_bytes = 0;       // total - free

  // As df computes it: used / (used + available) * 100, so reserved blocks count as unavailable.
  double used_percent() const;
};

FsUsage fs_usage_from_statvfs(const struct statvfs& st);

// statvfs of fs.path(mount_point) through run_with_mount_deadline: a hung mount (NFS, FUSE) leaves
// that thread blocked in the kernel and abandoned, never the caller. The error then says "mount X
// did not answer within 5 s"; while that call is still blocked, a later one on the same path
// answers the same at once instead of starting another thread.
[[nodiscard]] Result<FsUsage> stat_fs_usage(
    const HostFs& fs, std::string_view mount_point,
    std::chrono::milliseconds deadline = kMountCallDeadline);

}  // namespace gpud::host
