// The "memory" component: host memory totals from /proc/meminfo. Kernel-log OOM events come later.
#pragma once

#include <atomic>
#include <nlohmann/json.hpp>

#include "components/component.h"
#include "host/host_fs.h"
#include "host/meminfo.h"
#include "kmsg/rules.h"

namespace gpud::components {

// The OOM killer's kills in the kernel log: a report ("invoked oom-killer", then the victim's
// lines) or a victim line alone ("Out of memory: Kill process ...", "Killed process ...
// total-vm:...", "oom-kill:constraint=...", "Memory cgroup out of memory: ..."), one event a kill.
kmsg::ComponentRules memory_kernel_log_rules();

using MemorySnapshot = host::MemInfo;

nlohmann::json to_json(const MemorySnapshot& s);

// Pure rule: Healthy with the numbers, or Unhealthy with the error when collection failed.
CheckResult evaluate_memory(const Result<MemorySnapshot>& snapshot);

class MemoryComponent : public Component {
 public:
  explicit MemoryComponent(const ComponentContext& ctx);

  std::string_view name() const override { return "memory"; }
  CheckResult check() override;
  // Set-healthy purges this component's events (the OOM events, once they are recorded).
  bool can_set_healthy() const override { return true; }

 private:
  host::HostFs fs_;
  std::atomic<bool> warned_estimate_{false};
};

}  // namespace gpud::components
