// accelerator-nvidia-gpm: GPU Performance Monitoring. Per GPM-capable GPU, the driver's SM
// occupancy, integer / tensor / FP pipe utilisation (GPUd's accelerator_nvidia_gpm_gpu_*_percent
// gauges), graphics engine, SM and DRAM bandwidth utilisation and the PCIe rates between the
// previous check and this one (see nvml::GpmSampler).
#pragma once

#include "components/nvidia/nvidia_component.h"
#include "components/nvidia/verdict.h"

namespace gpud::components {

inline constexpr std::string_view kGpmName = "accelerator-nvidia-gpm";

// `sampled`: the sampler's answer for the GPM-capable GPUs (null: not sampled, e.g. in tests of
// support only). Healthy, with per-GPU support and values; an NVML error from the support query
// is Unhealthy. Sampling errors are reported in the reason and extra_info but stay Healthy: GPM is
// a metrics source (another profiler holding the counters, for instance, is not a GPU fault).
NvidiaVerdict evaluate_gpm(const nvml::NvmlSnapshot& snapshot,
                           const Result<std::vector<nvml::GpmGpuResult>>* sampled = nullptr);
// The GPU indices whose GPM support query answered yes.
std::vector<unsigned int> gpm_capable_gpus(const nvml::NvmlSnapshot& snapshot);
// "accelerator_nvidia_gpm_gpu_sm_occupancy_percent" for sm_occupancy;
// "accelerator_nvidia_gpm_gpu_pcie_tx_bytes_per_second" for a MiB/s metric (served in bytes).
std::string gpm_metric_name(const nvml::GpmMetricSpec& spec);
// NVML's value in the unit of gpm_metric_name: percent as is, MiB/s as bytes per second.
double gpm_metric_value(const nvml::GpmMetricSpec& spec, double nvml_value);

class GpmComponent : public NvidiaComponent {
 public:
  explicit GpmComponent(const ComponentContext& ctx);
  std::string_view name() const override { return kGpmName; }

 protected:
  CheckResult evaluate(const nvml::NvmlSnapshot& snapshot) override;
};

}  // namespace gpud::components
