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
// The labels of a GPU's accelerator_nvidia_gpu_info series: uuid, gpu and pci_bus_id as on every
// per-GPU series, NVML's product name, the driver version and the bus id in NVML's (and DCGM's)
// form ("00000000:5D:00.0").
Labels gpu_info_labels(const nvml::GpuSnapshot& gpu, const nvml::DriverInfo& driver);

class InfoComponent : public NvidiaComponent {
 public:
  explicit InfoComponent(const ComponentContext& ctx);
  std::string_view name() const override { return kNvmlFaultOwner; }

 protected:
  CheckResult evaluate(const nvml::NvmlSnapshot& snapshot) override;
  bool owns_nvml_faults() const override { return true; }
};

}  // namespace gpud::components
