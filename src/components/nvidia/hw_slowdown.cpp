#include "components/nvidia/hw_slowdown.h"

#include <fmt/format.h>

#include <set>

#include "components/nvidia/gpu_issues.h"
#include "core/strings.h"

namespace gpud::components {

namespace {
constexpr const char* kName = "accelerator-nvidia-hw-slowdown";
constexpr const char* kSlowdown = "accelerator_nvidia_clock_hw_slowdown";
constexpr const char* kThermal = "accelerator_nvidia_clock_hw_slowdown_thermal";
constexpr const char* kPowerBrake = "accelerator_nvidia_clock_hw_slowdown_power_brake";

}  // namespace

std::vector<Event> hw_slowdown_events(const nvml::NvmlSnapshot& snapshot, TimePoint now) {
  std::vector<Event> out;
  auto minute = std::chrono::time_point_cast<std::chrono::minutes>(now);
  for (const auto& g : snapshot.gpus) {
    if (!g.clocks_event_reasons.ok()) continue;
    auto reasons = nvml::hw_slowdown_reasons(g.clocks_event_reasons.value);
    if (reasons.empty()) continue;
    Event e;
    e.component = kName;
    e.time = minute;
    e.name = kHwSlowdownEvent;
    e.type = EventType::kWarning;
    std::string uuid = g.uuid.ok() ? g.uuid.value : gpu_label(g);
    e.message = uuid + ": " + join(reasons, ", ");
    e.extra_info = {{"data_source", "nvml"},
                    {"gpu_uuid", uuid},
                    {"gpu", g.index},
                    {"pci_bus_id", g.pci_bus_id.ok() ? g.pci_bus_id.value : ""}};
    out.push_back(std::move(e));
  }
  return out;
}

CheckResult evaluate_hw_slowdown(const nvml::NvmlSnapshot& snapshot,
                                 const std::vector<Event>& window_events, TimePoint now) {
  GpuIssues issues;
  nlohmann::json gpus = nlohmann::json::array();
  std::vector<std::vector<std::string>> rows = {{"GPU", "REASONS (hex)", "HW SLOWDOWN"}};
  std::vector<std::string> current;
  for (const auto& g : snapshot.gpus) {
    nlohmann::json j = gpu_identity_json(g);
    j["supported"] = g.clocks_event_reasons.supported();
    if (issues.usable(g, g.clocks_event_reasons, "clock event reasons")) {
      auto reasons = nvml::hw_slowdown_reasons(g.clocks_event_reasons.value);
      j["clock_event_reasons"] = g.clocks_event_reasons.value;
      j["hw_slowdown_reasons"] = reasons;
      if (!reasons.empty()) current.push_back(gpu_label(g) + ": " + join(reasons, ", "));
      rows.push_back({std::to_string(g.index), fmt::format("0x{:x}", g.clocks_event_reasons.value),
                      reasons.empty() ? "-" : join(reasons, ", ")});
    } else {
      std::string t = g.clocks_event_reasons.supported() ? "error" : "n/a";
      rows.push_back({std::to_string(g.index), t, t});
    }
    gpus.push_back(std::move(j));
  }
  std::set<int64_t> minutes;
  size_t count = 0;
  const TimePoint since = now - kHwSlowdownWindow;
  for (const auto& e : window_events) {
    if (e.name != kHwSlowdownEvent || e.time <= since || e.time > now) continue;
    ++count;
    minutes.insert(
        std::chrono::duration_cast<std::chrono::minutes>(e.time.time_since_epoch()).count());
  }
  const double windows = static_cast<double>(kHwSlowdownWindow.count());
  const double freq = static_cast<double>(minutes.size()) / windows;
  if (freq >= kHwSlowdownFrequencyThreshold) {
    issues.add(
        Health::kUnhealthy,
        fmt::format("hw slowdown events frequency per minute {:.2f} (total events per "
                    "minute count {}) exceeded threshold {:.2f} for the last {}m",
                    freq, minutes.size(), kHwSlowdownFrequencyThreshold, kHwSlowdownWindow.count()),
        RepairAction::kHardwareInspection);
  }
  std::string healthy =
      current.empty() ? "all " + std::to_string(snapshot.gpus.size()) +
                            " GPU(s) were checked, no hw slowdown found"
                      : fmt::format("hw slowdown in {} of the last {} minutes (below {:.0f}%): {}",
                                    minutes.size(), kHwSlowdownWindow.count(),
                                    kHwSlowdownFrequencyThreshold * 100, join(current, ", "));
  nlohmann::json data = {{"gpus", gpus},
                         {"window_minutes_with_events", minutes.size()},
                         {"window_events", count},
                         {"frequency", freq}};
  auto r = issues.result(kName, healthy, data, format_table(rows), now);
  if (auto& a = r.states[0].suggested_actions)
    a->description =
        "frequent hardware slowdown (thermal, power brake or external signal): "
        "inspect the GPU, its cooling and power delivery";
  if (issues.health() == Health::kUnhealthy && !current.empty())
    r.states[0].reason += "; now: " + join(current, ", ");
  return r;
}

HwSlowdownComponent::HwSlowdownComponent(const ComponentContext& ctx) : NvidiaComponent(ctx) {
  if (ctx.metrics == nullptr) return;
  ctx.metrics->describe(kSlowdown, "1 when the GPU reports HW slowdown (clock event reason 0x8)");
  ctx.metrics->describe(kThermal, "1 when the GPU reports HW thermal slowdown (0x40)");
  ctx.metrics->describe(kPowerBrake, "1 when the GPU reports HW power brake slowdown (0x80)");
}

CheckResult HwSlowdownComponent::evaluate(const nvml::NvmlSnapshot& snapshot) {
  const TimePoint now = Clock::now();
  if (MetricRegistry* m = ctx().metrics) {
    for (const auto& g : snapshot.gpus) {
      if (!g.clocks_event_reasons.ok()) continue;
      Labels l = gpu_labels(g);
      uint64_t r = g.clocks_event_reasons.value;
      m->set(kName, kSlowdown, (r & nvml::nvmlClocksThrottleReasonHwSlowdown) ? 1 : 0, l);
      m->set(kName, kThermal, (r & nvml::nvmlClocksThrottleReasonHwThermalSlowdown) ? 1 : 0, l);
      m->set(kName, kPowerBrake, (r & nvml::nvmlClocksThrottleReasonHwPowerBrakeSlowdown) ? 1 : 0,
             l);
    }
  }
  std::vector<Event> fresh = hw_slowdown_events(snapshot, now);
  for (const auto& e : fresh) record(e);
  if (ctx().scan_mode) return evaluate_hw_slowdown(snapshot, fresh, now);
  auto window = events(now - kHwSlowdownWindow, now);
  if (!window) {
    // The store failed: judge the current sample rather than nothing.
    return evaluate_hw_slowdown(snapshot, fresh, now);
  }
  return evaluate_hw_slowdown(snapshot, *window, now);
}

}  // namespace gpud::components
