// The "memory" component: host memory totals from /proc/meminfo, the BPF JIT's share of vmalloc
// from /proc/vmallocinfo, and the kernel log's OOM kills.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
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

  // How often /proc/vmallocinfo is read (below); the next check reads it. Tests read it at every
  // check (zero).
  static constexpr std::chrono::minutes kBpfJitReadInterval{5};
  void set_bpf_jit_read_interval(std::chrono::steady_clock::duration d);

 private:
  host::HostFs fs_;
  std::atomic<bool> warned_estimate_{false};
  // Set while /proc/vmallocinfo fails, so that a failing read logs once, and again after it
  // recovered and failed anew.
  std::atomic<bool> bpf_jit_failing_{false};
  // /proc/vmallocinfo is read at most every kBpfJitReadInterval, and its sum reported in between
  // (a failed read: absent until the next read). The kernel prints a line per vmalloc mapping
  // with its caller's symbol, walking them under the vmap lock: 5 ms of system time for 1,660
  // lines here, the largest part of the daemon's idle CPU, and more on a GPU node, whose driver
  // maps thousands. What the BPF JIT holds changes when programs are loaded, not by the minute,
  // and it is reported, never judged.
  mutable std::mutex bpf_jit_mu_;
  std::chrono::steady_clock::duration bpf_jit_read_interval_ = kBpfJitReadInterval;
  std::optional<std::chrono::steady_clock::time_point> bpf_jit_read_at_;
  std::optional<uint64_t> bpf_jit_bytes_;
  std::optional<uint64_t> bpf_jit_bytes();  // read, or the reading kept
};

}  // namespace gpud::components
