// HwSlowdownComponent ("accelerator-nvidia-hw-slowdown"): NVML clock event reasons. HW slowdown, HW
// thermal slowdown and HW power brake are recorded as `hw_slowdown` events (one per GPU per
// minute); when such events fall in at least 6 of the last 10 minutes the GPU needs inspection.
#pragma once

#include "components/nvidia/nvidia_component.h"
#include "components/nvidia/verdict.h"

namespace gpud::components {

inline constexpr const char* kHwSlowdownEvent = "hw_slowdown";
inline constexpr std::chrono::minutes kHwSlowdownWindow{10};
inline constexpr double kHwSlowdownFrequencyThreshold = 0.6;

// The hw_slowdown events the snapshot calls for, stamped with `now` truncated to the minute (so the
// store's dedup keeps one per GPU per minute).
std::vector<Event> hw_slowdown_events(const nvml::NvmlSnapshot& snapshot, TimePoint now);

// The rule (pure): `window_events` are this component's events of the last 10 minutes (in scan
// mode: only those of the current sample). Distinct minutes with a hw_slowdown event / 10 >= 0.6
// ⇒ Unhealthy + HARDWARE_INSPECTION; else Healthy with the current reasons listed.
NvidiaVerdict evaluate_hw_slowdown(const nvml::NvmlSnapshot& snapshot,
                                   const std::vector<Event>& window_events, TimePoint now);

class HwSlowdownComponent : public NvidiaComponent {
 public:
  explicit HwSlowdownComponent(const ComponentContext& ctx);
  std::string_view name() const override { return "accelerator-nvidia-hw-slowdown"; }
  bool can_set_healthy() const override { return true; }

 protected:
  CheckResult evaluate(const nvml::NvmlSnapshot& snapshot) override;
};

}  // namespace gpud::components
