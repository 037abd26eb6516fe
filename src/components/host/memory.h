// The "memory" component: host memory totals from /proc/meminfo, the BPF JIT's share of vmalloc
// from /proc/vmallocinfo, and the kernel log's OOM kills.
#pragma once

#include <atomic>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>

#include "components/component.h"
#include "host/host_fs.h"
#include "host/meminfo.h"
#include "kmsg/rules.h"

namespace gpud::components {

// The OOM killer's kills in the kernel log: a report ("invoked oom-killer", then the victim's
// lines) or a victim line alone ("Out of memory: Kill process ...", "Killed process ...
// total-vm:...", "oom-kill:constraint=...", "Memory cgroup out of memory: ..."), one event a kill.
kmsg::ComponentRules memory_kernel_log_rules();

struct MemorySnapshot : host::MemInfo {
  // Bytes the BPF JIT holds in vmalloc; absent when /proc/vmallocinfo cannot be read (it is
  // root-only) or parsed.
  std::optional<uint64_t> bpf_jit_buffer_bytes;
};

nlohmann::json to_json(const MemorySnapshot& s);

// Pure rule: Healthy with the numbers, or Unhealthy with the error when /proc/meminfo could not be
// read. The vmalloc and BPF JIT values are reported, never judged (GPUd sets no threshold on them).
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
  // Set while /proc/vmallocinfo fails, so that a failing read logs once, and again after it
  // recovered and failed anew.
  std::atomic<bool> bpf_jit_failing_{false};
};

}  // namespace gpud::components
