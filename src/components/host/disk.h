// The "disk" component: usage of "/" and the configured mount points (mountinfo + statvfs).
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "components/component.h"
#include "components/kernel_log_support.h"
#include "host/fs_usage.h"
#include "host/host_fs.h"
#include "host/mountinfo.h"
#include "kmsg/rules.h"

namespace gpud::components {

// RAID, read-only remounts, NVMe path/timeout/disable, buffer I/O and superblock errors in the
// kernel log.
kmsg::ComponentRules disk_kernel_log_rules();

// "/" with less than this available to unprivileged users is Degraded (GPUd's threshold).
inline constexpr uint64_t kRootMinAvailableBytes = 500ULL << 20;

struct TrackedMount {
  std::string mount_point;
  bool mounted = false;  // present in the mount table
  std::string device;    // mountinfo source, e.g. /dev/nvme0n1p1
  std::string fs_type;
  std::string major_minor;
  std::optional<host::FsUsage> usage;  // set when statvfs succeeded
  std::string error;                   // statvfs failure
};

// A network file system in the mount table (host::network_fs_type: NFS, Lustre, WekaFS, virtiofs)
// that is not a tracked mount point, statted with the mount deadline as GPUd's disk component does
// once NFS checks are configured.
struct NetworkMount {
  std::string mount_point;
  std::string source;  // "172.16.0.100@tcp:/lustrefs"
  std::string fs_type;
  std::optional<host::FsUsage> usage;
  std::string error;
  bool timed_out = false;
  int timeouts_in_a_row = 0;  // this check's included; 0 when it answered
};

// GPUd's nfsStatTimeoutConsecutiveThreshold: a network mount whose statfs timed out this many
// checks in a row makes the disk Degraded.
inline constexpr int kNetworkMountTimeoutChecks = 5;

struct DiskSnapshot {
  std::vector<TrackedMount> mounts;          // in tracking order, "/" first
  std::vector<NetworkMount> network_mounts;  // in mount-table order
  bool mount_table_read = true;              // false: mountinfo unreadable, "mounted" is unknown
  std::string mount_table_error;
};

nlohmann::json to_json(const DiskSnapshot& s);

// "/" first, then the configured ones in order; trailing slashes dropped, duplicates and relative
// paths ignored.
std::vector<std::string> tracked_mount_points(const std::vector<std::string>& configured);

// Pure rule: Degraded when "/" has < 500 MiB available, a tracked mount point is not mounted,
// statvfs failed, or a network mount's statfs timed out kNetworkMountTimeoutChecks checks in a
// row; else Healthy. A network mount's space and other stat errors are shown, not judged (GPUd).
CheckResult evaluate_disk(const DiskSnapshot& snapshot);

// Kernel-log disk errors (RAID failure, read-only remount, NVMe, buffer I/O, ...) of the last 14
// days: each event name the reboot-history rule does not consider resolved makes the disk
// Unhealthy; HARDWARE_INSPECTION dominates REBOOT_SYSTEM. `counts` (EventDigest::counts) says how
// many events each stands for; empty: one each.
KernelLogVerdict evaluate_disk_events(const std::vector<Event>& events,
                                      const std::vector<TimePoint>& reboots,
                                      const std::vector<uint64_t>& counts = {});

class DiskComponent : public Component {
 public:
  explicit DiskComponent(const ComponentContext& ctx);

  std::string_view name() const override { return "disk"; }
  CheckResult check() override;
  // Set-healthy purges this component's events (kernel-log disk errors, once they are recorded).
  bool can_set_healthy() const override { return true; }

 private:
  DiskSnapshot collect();
  void collect_network_mounts(const host::MountTable& table, DiskSnapshot& s);

  host::HostFs fs_;
  std::vector<std::string> tracked_;
  std::atomic<bool> warned_mount_table_{false};
  // Network mounts are statted only with --nfs-checker-configs (GPUd's condition).
  bool network_mounts_ = false;
  // Mount point -> statfs timeouts in a row; only mounts still in the table are kept.
  std::mutex network_mu_;
  std::map<std::string, int> network_timeouts_;
};

}  // namespace gpud::components
