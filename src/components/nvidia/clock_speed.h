// ClockSpeedComponent ("accelerator-nvidia-clock-speed"): graphics, memory and SM clocks per GPU;
// only NVML errors make it Unhealthy.
#pragma once

#include "components/nvidia/nvidia_component.h"
#include "components/nvidia/verdict.h"

namespace gpud::components {

// The rule over one snapshot (pure; unit tests call it).
NvidiaVerdict evaluate_clock_speed(const nvml::NvmlSnapshot& snapshot);

class ClockSpeedComponent : public NvidiaComponent {
 public:
  explicit ClockSpeedComponent(const ComponentContext& ctx);
  std::string_view name() const override { return "accelerator-nvidia-clock-speed"; }

 protected:
  CheckResult evaluate(const nvml::NvmlSnapshot& snapshot) override;
};

}  // namespace gpud::components
