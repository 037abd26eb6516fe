#include "components/nvidia/gpu_counts.h"

#include <fmt/format.h>

#include "core/reboot_rules.h"
#include "host/pci.h"

namespace gpud::components {

namespace {
constexpr const char* kName = "accelerator-nvidia-gpu-counts";
constexpr const char* kOsComponent = "os";
constexpr const char* kRebootEvent = "reboot";
constexpr const char* kFound = "accelerator_nvidia_gpu_counts_found";
constexpr const char* kPci = "accelerator_nvidia_gpu_counts_pci";
constexpr const char* kExpected = "accelerator_nvidia_gpu_counts_expected";
}  // namespace

NvidiaVerdict evaluate_gpu_counts(const GpuCountInput& in) {
  NvidiaVerdict v;
  v.data = {
      {"count_nvml", in.nvml_count}, {"count_sysfs", in.sysfs_count}, {"expected", in.expected}};
  v.detail_preface =
      fmt::format("NVML GPUs: {}\nPCI (sysfs) NVIDIA GPUs: {}\nexpected: {}\n", in.nvml_count,
                  in.sysfs_count, in.expected > 0 ? std::to_string(in.expected) : "not set");
  if (in.expected <= 0) {
    v.healthy_reason = "GPU count thresholds not set, skipping";
  } else if (in.nvml_count == static_cast<size_t>(in.expected)) {
    v.healthy_reason = fmt::format("nvidia gpu count matches the expected {}", in.expected);
  } else {
    v.add(Health::kUnhealthy,
          fmt::format("nvidia gpu count mismatch (found {}, expected {})", in.nvml_count,
                      in.expected),
          evaluate_suggested_actions(in.reboots, in.mismatches));
    v.action_description = v.action() == RepairAction::kHardwareInspection
                               ? "GPU count still wrong after repeated reboots: inspect "
                                 "the GPUs and their seating"
                               : "reboot the system to re-enumerate the GPUs";
  }
  return v;
}

GpuCountsComponent::GpuCountsComponent(const ComponentContext& ctx)
    : NvidiaComponent(ctx), fs_(ctx.config->host_root) {
  // Gauges, so that "fewer GPUs than expected" is one Prometheus comparison.
  ctx.metrics->describe(kFound, "NVIDIA GPUs NVML enumerates");
  ctx.metrics->describe(kPci, "NVIDIA GPUs on the PCI bus (sysfs display controllers)");
  ctx.metrics->describe(kExpected, "Expected NVIDIA GPU count (--gpu-count; absent when not set)");
}

CheckResult GpuCountsComponent::evaluate(const nvml::NvmlSnapshot& snapshot) {
  const TimePoint now = Clock::now();
  GpuCountInput in;
  in.nvml_count = snapshot.gpus.size();
  in.expected = config().gpu_count;
  in.sysfs_count = host::find_nvidia_gpus(fs_).size();
  ctx().metrics->set(kName, kFound, static_cast<double>(in.nvml_count));
  ctx().metrics->set(kName, kPci, static_cast<double>(in.sysfs_count));
  if (in.expected > 0) ctx().metrics->set(kName, kExpected, in.expected);
  if (in.expected > 0 && in.nvml_count != static_cast<size_t>(in.expected)) {
    Event e;
    e.time = std::chrono::time_point_cast<std::chrono::seconds>(now);
    e.name = kGpuCountMismatchEvent;
    e.type = EventType::kWarning;
    e.message = fmt::format("nvidia gpu count mismatch (found {}, expected {})", in.nvml_count,
                            in.expected);
    record(e);
    const TimePoint since = now - kGpuCountLookback;
    if (ctx().events != nullptr) {
      if (auto mine = events(since, now + std::chrono::seconds(1)))
        for (const auto& ev : unacknowledged(std::move(*mine)))
          if (ev.name == kGpuCountMismatchEvent) in.mismatches.push_back(ev.time);
      if (auto os = ctx().events->query(kOsComponent, since, now))
        for (const auto& ev : *os)
          if (ev.name == kRebootEvent) in.reboots.push_back(ev.time);
    }
    if (in.mismatches.empty()) in.mismatches.push_back(now);
  }
  return render_verdict(name(), evaluate_gpu_counts(in), now);
}

}  // namespace gpud::components
