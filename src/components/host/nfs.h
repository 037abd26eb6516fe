// NfsComponent ("nfs"): NFS hangs seen in the kernel log (server not responding, lock reclaim
// failures, writeback stack hints), judged with the reboot-history rule.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "components/component.h"
#include "components/kernel_log_support.h"
#include "kmsg/rules.h"

namespace gpud::components {

// NFS servers not responding and back, lock reclaim failures and writeback hangs (stack frames of
// NFS writeback functions) in the kernel log.
kmsg::ComponentRules nfs_kernel_log_rules();

// GPUd's hang rule over 3 days of events: a lock-reclaim failure, a server still not responding
// (no later "OK"), or >= 2 writeback stack hints, counting only events after the newest reboot;
// then the reboot-history rule picks REBOOT_SYSTEM or HARDWARE_INSPECTION.
KernelLogVerdict evaluate_nfs(const std::vector<Event>& events,
                              const std::vector<TimePoint>& reboots);

class NfsComponent : public Component {
 public:
  explicit NfsComponent(const ComponentContext& ctx) : Component(ctx) {}
  std::string_view name() const override { return "nfs"; }
  CheckResult check() override;
  bool can_set_healthy() const override { return true; }
};

}  // namespace gpud::components
