// NfsComponent ("nfs"): NFS hangs seen in the kernel log (server not responding, lock reclaim
// failures, writeback stack hints), judged with the reboot-history rule.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "components/component.h"
#include "components/kernel_log_support.h"
#include "host/host_fs.h"
#include "kmsg/rules.h"

namespace gpud::components {

// NFS servers not responding and back, lock reclaim failures and writeback hangs (stack frames of
// NFS writeback functions) in the kernel log.
kmsg::ComponentRules nfs_kernel_log_rules();

// How long a server that stopped responding has to say "OK" before it counts as a hang.
inline constexpr std::chrono::minutes kNfsOkWithin{5};

// The hang rule over 3 days of events, counting only events after the newest reboot: a
// lock-reclaim failure, >= 2 writeback stack hints, or a server that is not responding (no "OK"
// since) and either said so twice or has not said "OK" within kNfsOkWithin of `now` -> Unhealthy,
// with the reboot-history rule picking REBOOT_SYSTEM or HARDWARE_INSPECTION. A single "not
// responding" younger than that is Degraded.
KernelLogVerdict evaluate_nfs(const std::vector<Event>& events,
                              const std::vector<TimePoint>& reboots, TimePoint now);

// The NFS probe of each configured volume (--nfs-checker-configs): a volume whose mount (from
// <host root>/proc/self/mountinfo) is not NFS, a probe step that fails or a mount that does not
// answer within 5 s is a problem (Degraded); `passed` says what each good probe read.
struct NfsProbeVerdict {
  std::vector<std::string> problems;
  std::vector<std::string> passed;
};
NfsProbeVerdict probe_nfs_volumes(const host::HostFs& fs,
                                  const std::vector<Config::NfsChecker>& checkers);

class NfsComponent : public Component {
 public:
  explicit NfsComponent(const ComponentContext& ctx) : Component(ctx) {}
  std::string_view name() const override { return "nfs"; }
  CheckResult check() override;
  bool can_set_healthy() const override { return true; }
};

}  // namespace gpud::components
