// EccComponent ("accelerator-nvidia-ecc"): ECC mode and error counts (volatile / aggregate, per
// memory location); a volatile uncorrectable error is Unhealthy with REBOOT_SYSTEM, as DCGM's
// memory watch fails on a volatile DBE.
#pragma once

#include "components/nvidia/nvidia_component.h"
#include "components/nvidia/verdict.h"

namespace gpud::components {

// The rule over one snapshot (pure; unit tests call it).
NvidiaVerdict evaluate_ecc(const nvml::NvmlSnapshot& snapshot);

class EccComponent : public NvidiaComponent {
 public:
  explicit EccComponent(const ComponentContext& ctx);
  std::string_view name() const override { return "accelerator-nvidia-ecc"; }

 protected:
  CheckResult evaluate(const nvml::NvmlSnapshot& snapshot) override;
};

}  // namespace gpud::components
