// BlockDevices: the host's disks and partitions from /sys/block, with mount points and filesystem
// types matched by major:minor against /proc/self/mountinfo (what lsblk shows, without running
// lsblk).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "host/host_fs.h"

namespace gpud::host {

struct BlockDevice {
  std::string name;         // "nvme0n1", "nvme0n1p2"
  std::string type;         // "disk", "part", "loop", "lvm", "raid1", ...
  std::string major_minor;  // "259:0"
  int64_t size_bytes = 0;   // sectors x 512
  int64_t used_bytes = 0;   // of the mounted filesystem (0 when not mounted)
  bool rotational = false;
  std::string model, vendor, serial, rev, wwn;
  std::string mount_point, fs_type, part_uuid;
  std::vector<std::string> parents, children;
};

// One mount of a block device: the fields of a mountinfo line we need.
struct BlockMount {
  std::string major_minor;
  std::string mount_point;  // octal escapes (\040) decoded
  std::string fs_type;
};

std::vector<BlockMount> parse_block_mounts(std::string_view mountinfo);
// Disks (sorted by name), each followed by its partitions; loop/ram/zram devices of size 0 are
// skipped.
std::vector<BlockDevice> read_block_devices(const HostFs& fs);
// The device whose filesystem holds `path` (longest mount point prefix), e.g. the container root
// disk for
// "/var/lib/kubelet"; "" when none.
std::string find_disk_for_path(const std::vector<BlockDevice>& devices,
                               const std::vector<BlockMount>& mounts, std::string_view path);

}  // namespace gpud::host
