// TemperatureComponent ("accelerator-nvidia-temperature"): core and HBM temperatures, margin and
// thresholds; Degraded near or past a threshold (GPUd's rules).
#pragma once

#include "components/nvidia/nvidia_component.h"
#include "components/nvidia/verdict.h"

namespace gpud::components {

// The rule over one snapshot (pure; unit tests call it); slowdown_margin_c is
// --threshold-celsius-slowdown-margin (0: off).
NvidiaVerdict evaluate_temperature(const nvml::NvmlSnapshot& snapshot, int slowdown_margin_c);

class TemperatureComponent : public NvidiaComponent {
 public:
  explicit TemperatureComponent(const ComponentContext& ctx);
  std::string_view name() const override { return "accelerator-nvidia-temperature"; }

 protected:
  CheckResult evaluate(const nvml::NvmlSnapshot& snapshot) override;
};

}  // namespace gpud::components
