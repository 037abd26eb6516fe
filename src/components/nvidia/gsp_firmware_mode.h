// accelerator-nvidia-gsp-firmware-mode: GSP firmware mode and version per GPU, for information.
#pragma once

#include "components/nvidia/nvidia_component.h"
#include "components/nvidia/verdict.h"

namespace gpud::components {

inline constexpr std::string_view kGspFirmwareModeName = "accelerator-nvidia-gsp-firmware-mode";

// Healthy with the mode and version of each GPU; NOT_SUPPORTED is not applicable; other NVML
// errors are Unhealthy.
NvidiaVerdict evaluate_gsp_firmware_mode(const nvml::NvmlSnapshot& snapshot);

class GspFirmwareModeComponent : public NvidiaComponent {
 public:
  explicit GspFirmwareModeComponent(const ComponentContext& ctx) : NvidiaComponent(ctx) {}
  std::string_view name() const override { return kGspFirmwareModeName; }

 protected:
  CheckResult evaluate(const nvml::NvmlSnapshot& snapshot) override {
    return render_verdict(name(), evaluate_gsp_firmware_mode(snapshot));
  }
};

}  // namespace gpud::components
