// UtilizationComponent ("accelerator-nvidia-utilization"): GPU and memory utilisation per GPU; only
// NVML errors make it Unhealthy.
#pragma once

#include "components/nvidia/nvidia_component.h"
#include "components/nvidia/verdict.h"

namespace gpud::components {

// The rule over one snapshot (pure; unit tests call it).
NvidiaVerdict evaluate_utilization(const nvml::NvmlSnapshot& snapshot);

class UtilizationComponent : public NvidiaComponent {
 public:
  explicit UtilizationComponent(const ComponentContext& ctx);
  std::string_view name() const override { return "accelerator-nvidia-utilization"; }

 protected:
  CheckResult evaluate(const nvml::NvmlSnapshot& snapshot) override;
};

}  // namespace gpud::components
