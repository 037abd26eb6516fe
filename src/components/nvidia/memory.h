// GpuMemoryComponent ("accelerator-nvidia-memory", GpuMemory: the host has a MemoryComponent): GPU
// memory (total, reserved, used, free) per GPU; only NVML errors make it Unhealthy.
#pragma once

#include "components/nvidia/nvidia_component.h"
#include "components/nvidia/verdict.h"

namespace gpud::components {

// The rule over one snapshot (pure; unit tests call it).
NvidiaVerdict evaluate_gpu_memory(const nvml::NvmlSnapshot& snapshot);

class GpuMemoryComponent : public NvidiaComponent {
 public:
  explicit GpuMemoryComponent(const ComponentContext& ctx);
  std::string_view name() const override { return "accelerator-nvidia-memory"; }

 protected:
  CheckResult evaluate(const nvml::NvmlSnapshot& snapshot) override;
};

}  // namespace gpud::components
