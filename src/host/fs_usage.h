// statvfs(2) of one mount point under the host root, as byte counts the disk component reports.
#pragma once

#include <sys/statvfs.h>

#include <cstdint>
#include <string_view>

#include "core/result.h"
#include "host/host_fs.h"

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

// statvfs of fs.path(mount_point). May block on a hung network filesystem; callers only pass the
// mount points they track.
[[nodiscard]] Result<FsUsage> stat_fs_usage(const HostFs& fs, std::string_view mount_point);

}  // namespace gpud::host
