#include "components/nvidia/hw_slowdown.h"

#include <fmt/format.h>

#include <set>

#include "core/strings.h"

namespace gpud::components {

namespace {
constexpr const char* kName = "accelerator-nvidia-hw-slowdown";

// 1 when the GPU's clock event reasons have the bit, 0 when not; nullopt when unread.
template <uint64_t kBit>
std::optional<double> has_reason(const nvml::GpuSnapshot& g) {
  if (!g.clocks_event_reasons.ok()) return std::nullopt;
  return (g.clocks_event_reasons.value & kBit) != 0 ? 1 : 0;
}

constexpr GpuMetric kMetrics[] = {
    {"accelerator_nvidia_clock_hw_slowdown",
     "1 when the GPU reports HW slowdown (clock event reason 0x8)", MetricKind::kGauge,
     has_reason<nvml::nvmlClocksThrottleReasonHwSlowdown>},
    {"accelerator_nvidia_clock_hw_slowdown_thermal",
     "1 when the GPU reports HW thermal slowdown (0x40)", MetricKind::kGauge,
     has_reason<nvml::nvmlClocksThrottleReasonHwThermalSlowdown>},
    {"accelerator_nvidia_clock_hw_slowdown_power_brake",
     "1 when the GPU reports HW power brake slowdown (0x80)", MetricKind::kGauge,
     has_reason<nvml::nvmlClocksThrottleReasonHwPowerBrakeSlowdown>},
};

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

NvidiaVerdict evaluate_hw_slowdown(const nvml::NvmlSnapshot& snapshot,
                                   const std::vector<Event>& window_events, TimePoint now) {
  NvidiaVerdict v;
  v.action_description =
      "frequent hardware slowdown (thermal, power brake or external signal): "
      "inspect the GPU, its cooling and power delivery";
  v.columns = {"REASONS (hex)", "HW SLOWDOWN"};
  std::vector<std::string> current;
  for (const auto& g : snapshot.gpus) {
    GpuRow& row = v.gpus.emplace_back(g);
    row.data["supported"] = g.clocks_event_reasons.supported();
    if (v.usable(g, g.clocks_event_reasons, "clock event reasons")) {
      auto reasons = nvml::hw_slowdown_reasons(g.clocks_event_reasons.value);
      row.data["clock_event_reasons"] = g.clocks_event_reasons.value;
      row.data["hw_slowdown_reasons"] = reasons;
      if (!reasons.empty()) current.push_back(gpu_label(g) + ": " + join(reasons, ", "));
      row.cells = {fmt::format("0x{:x}", g.clocks_event_reasons.value),
                   reasons.empty() ? "-" : join(reasons, ", ")};
    } else {
      row.cells.assign(v.columns.size(), unread_text(g.clocks_event_reasons));
    }
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
    v.add(
        Health::kUnhealthy,
        fmt::format("hw slowdown events frequency per minute {:.2f} (total events per "
                    "minute count {}) exceeded threshold {:.2f} for the last {}m",
                    freq, minutes.size(), kHwSlowdownFrequencyThreshold, kHwSlowdownWindow.count()),
        RepairAction::kHardwareInspection);
  }
  // An Unhealthy reason ends with the GPUs slowed down now.
  if (v.health() == Health::kUnhealthy && !current.empty())
    v.reason_suffix = "; now: " + join(current, ", ");
  v.healthy_reason =
      current.empty() ? "all " + std::to_string(snapshot.gpus.size()) +
                            " GPU(s) were checked, no hw slowdown found"
                      : fmt::format("hw slowdown in {} of the last {} minutes (below {:.0f}%): {}",
                                    minutes.size(), kHwSlowdownWindow.count(),
                                    kHwSlowdownFrequencyThreshold * 100, join(current, ", "));
  v.data = {{"window_minutes_with_events", minutes.size()},
            {"window_events", count},
            {"frequency", freq}};
  return v;
}

HwSlowdownComponent::HwSlowdownComponent(const ComponentContext& ctx)
    : NvidiaComponent(ctx, kMetrics) {}

CheckResult HwSlowdownComponent::evaluate(const nvml::NvmlSnapshot& snapshot) {
  const TimePoint now = Clock::now();
  std::vector<Event> fresh = hw_slowdown_events(snapshot, now);
  for (const auto& e : fresh) record(e);
  if (ctx().scan_mode)
    return render_verdict(name(), evaluate_hw_slowdown(snapshot, fresh, now), now);
  auto window = events(now - kHwSlowdownWindow, now);
  // When the store failed, the current sample is judged rather than nothing.
  return render_verdict(
      name(),
      evaluate_hw_slowdown(snapshot, window ? unacknowledged(std::move(*window)) : fresh, now),
      now);
}

}  // namespace gpud::components
