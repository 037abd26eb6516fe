// InfoComponent ("accelerator-nvidia-info"): product, brand, architecture, driver and CUDA versions
// and the identity of every GPU; always Healthy when NVML works.
#pragma once

#include "components/nvidia/nvidia_component.h"
#include "components/nvidia/verdict.h"

namespace gpud::components {

// The rule over one snapshot (pure; unit tests call it).
NvidiaVerdict evaluate_info(const nvml::NvmlSnapshot& snapshot);

class InfoComponent : public NvidiaComponent {
 public:
  explicit InfoComponent(const ComponentContext& ctx);
  std::string_view name() const override { return "accelerator-nvidia-info"; }

 protected:
  CheckResult evaluate(const nvml::NvmlSnapshot& snapshot) override;
};

}  // namespace gpud::components
