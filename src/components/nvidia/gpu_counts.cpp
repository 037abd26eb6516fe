#include "components/nvidia/gpu_counts.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <set>

#include "core/pci_address.h"
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

int expected_gpu_count(const GpuCountInput& in) {
  return in.expected > 0 ? in.expected : static_cast<int>(in.sysfs_count);
}

std::string gpu_count_mismatch(const GpuCountInput& in) {
  const int expected = expected_gpu_count(in);
  if (expected <= 0) return "";
  const bool configured = in.expected > 0;
  const size_t want = static_cast<size_t>(expected);
  if (configured ? in.nvml_count == want : in.nvml_count >= want) return "";
  std::string msg = fmt::format("nvidia gpu count mismatch (found {}, expected {}{})",
                                in.nvml_count, expected, configured ? "" : " on the PCI bus");
  if (!in.missing_bus_ids.empty())
    msg += fmt::format("; not seen by NVML: {}", fmt::join(in.missing_bus_ids, ", "));
  return msg;
}

NvidiaVerdict evaluate_gpu_counts(const GpuCountInput& in) {
  NvidiaVerdict v;
  const int expected = expected_gpu_count(in);
  const bool configured = in.expected > 0;
  v.data = {{"count_nvml", in.nvml_count},
            {"count_sysfs", in.sysfs_count},
            {"expected", expected},
            {"expected_from", configured     ? "gpu-count"
                              : expected > 0 ? "pci"
                                             : "none"},
            {"missing_bus_ids", in.missing_bus_ids}};
  if (!in.passthrough.empty()) v.data["passthrough_bus_ids"] = in.passthrough;
  v.detail_preface = fmt::format(
      "NVML GPUs: {}\nPCI (sysfs) NVIDIA GPUs: {}{}\nexpected: {}\n", in.nvml_count, in.sysfs_count,
      in.passthrough.empty()
          ? ""
          : fmt::format(" (and {} bound to vfio-pci, not counted)", in.passthrough.size()),
      configured     ? std::to_string(expected) + " (--gpu-count)"
      : expected > 0 ? std::to_string(expected) + " (the PCI bus)"
                     : "not set");
  if (std::string mismatch = gpu_count_mismatch(in); !mismatch.empty()) {
    v.add(Health::kUnhealthy, std::move(mismatch),
          evaluate_suggested_actions(in.reboots, in.mismatches));
    v.action_description = v.action() == RepairAction::kHardwareInspection
                               ? "GPU count still wrong after repeated reboots: inspect "
                                 "the GPUs and their seating"
                               : "reboot the system to re-enumerate the GPUs";
  } else if (expected <= 0) {
    v.healthy_reason =
        "GPU count thresholds not set and no NVIDIA GPU listed on the PCI bus, skipping";
  } else if (configured) {
    v.healthy_reason = fmt::format("nvidia gpu count matches the expected {}", expected);
  } else {
    v.healthy_reason = fmt::format("nvidia gpu count {} matches the {} GPUs on the PCI bus",
                                   in.nvml_count, expected);
  }
  return v;
}

GpuCountsComponent::GpuCountsComponent(const ComponentContext& ctx)
    : NvidiaComponent(ctx), fs_(ctx.config->host_root) {
  // Gauges, so that "fewer GPUs than expected" is one Prometheus comparison.
  ctx.metrics->describe(kFound, "NVIDIA GPUs NVML enumerates");
  ctx.metrics->describe(kPci, "NVIDIA GPUs on the PCI bus (sysfs display controllers)");
  ctx.metrics->describe(kExpected,
                        "Expected NVIDIA GPU count (--gpu-count, else the NVIDIA GPUs on the PCI "
                        "bus; absent when neither)");
}

CheckResult GpuCountsComponent::evaluate(const nvml::NvmlSnapshot& snapshot) {
  const TimePoint now = Clock::now();
  GpuCountInput in;
  in.nvml_count = snapshot.gpus.size();
  in.expected = config().gpu_count;
  std::set<std::string> seen;
  for (const auto& g : snapshot.gpus)
    if (g.pci_bus_id.ok()) seen.insert(normalize_pci_bus_id(g.pci_bus_id.value));
  for (const std::string& dev : host::find_nvidia_gpus(fs_)) {
    if (host::pci_driver(fs_, dev) == "vfio-pci") {
      in.passthrough.push_back(dev);
      continue;
    }
    ++in.sysfs_count;
    if (!seen.count(normalize_pci_bus_id(dev))) in.missing_bus_ids.push_back(dev);
  }
  const int expected = expected_gpu_count(in);
  ctx().metrics->set(kName, kFound, static_cast<double>(in.nvml_count));
  ctx().metrics->set(kName, kPci, static_cast<double>(in.sysfs_count));
  if (expected > 0)
    ctx().metrics->set(kName, kExpected, expected);
  else
    ctx().metrics->replace_series(kName, kExpected, {});
  if (std::string mismatch = gpu_count_mismatch(in); !mismatch.empty()) {
    Event e;
    e.time = std::chrono::time_point_cast<std::chrono::seconds>(now);
    e.name = kGpuCountMismatchEvent;
    e.type = EventType::kWarning;
    e.message = std::move(mismatch);
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
