// PowerComponent ("accelerator-nvidia-power"): power usage and limits per GPU; only NVML errors
// make it Unhealthy.
#pragma once

#include "components/nvidia/nvidia_component.h"
#include "components/nvidia/verdict.h"

namespace gpud::components {

// The rule over one snapshot (pure; unit tests call it).
NvidiaVerdict evaluate_power(const nvml::NvmlSnapshot& snapshot);

class PowerComponent : public NvidiaComponent {
 public:
  explicit PowerComponent(const ComponentContext& ctx);
  std::string_view name() const override { return "accelerator-nvidia-power"; }

 protected:
  CheckResult evaluate(const nvml::NvmlSnapshot& snapshot) override;
};

}  // namespace gpud::components
