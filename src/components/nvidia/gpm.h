// accelerator-nvidia-gpm: whether each GPU supports GPU Performance Monitoring. Sampling the GPM
// metrics (SM occupancy, tensor utilisation, …) is not in the snapshot yet: support only.
#pragma once

#include "components/nvidia/nvidia_component.h"

namespace gpud::components {

inline constexpr std::string_view kGpmName = "accelerator-nvidia-gpm";

// Healthy with per-GPU support; NVML errors other than NOT_SUPPORTED are Unhealthy.
CheckResult evaluate_gpm(const nvml::NvmlSnapshot& snapshot);

class GpmComponent : public NvidiaComponent {
 public:
  explicit GpmComponent(const ComponentContext& ctx) : NvidiaComponent(ctx) {}
  std::string_view name() const override { return kGpmName; }

 protected:
  CheckResult evaluate(const nvml::NvmlSnapshot& snapshot) override {
    return evaluate_gpm(snapshot);
  }
};

}  // namespace gpud::components
