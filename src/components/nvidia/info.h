// InfoComponent ("accelerator-nvidia-info"): product, brand, architecture, driver and CUDA versions
// and the identity of every GPU. It owns NVML's faults (kNvmlFaultOwner): NVML missing while NVIDIA
// GPUs are expected, failing to initialise or not answering, and each GPU that is lost or needs a
// reset, named with its index, bus id, UUID, serial and the call that said so.
#pragma once

#include "components/nvidia/nvidia_component.h"
#include "components/nvidia/verdict.h"

namespace gpud::components {

// The rule over one snapshot (pure; unit tests call it): Healthy, but Unhealthy + REBOOT_SYSTEM
// for each GPU that is lost or requires a reset.
NvidiaVerdict evaluate_info(const nvml::NvmlSnapshot& snapshot);

class InfoComponent : public NvidiaComponent {
 public:
  explicit InfoComponent(const ComponentContext& ctx);
  std::string_view name() const override { return kNvmlFaultOwner; }

 protected:
  CheckResult evaluate(const nvml::NvmlSnapshot& snapshot) override;
  bool owns_nvml_faults() const override { return true; }
};

}  // namespace gpud::components
