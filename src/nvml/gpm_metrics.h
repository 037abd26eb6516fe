// The GPM metrics gpud reports: NVML metric id, gpud's name for it and NVML's unit. Shared by the
// sampler and by the fake library's scenario keys (testing/fake_nvml), so both spell them the same
// way.
#pragma once

#include <array>

#include "nvml/abi.h"

namespace gpud::nvml {

enum class GpmUnit {
  kPercent,             // 0.0-100.0
  kMebibytesPerSecond,  // MiB/s (the PCIe rates)
};

struct GpmMetricSpec {
  unsigned int id;   // NVML_GPM_METRIC_*
  const char* name;  // metric name stem, GPUd's where GPUd has it: "sm_occupancy", "fp32_util", ...
  GpmUnit unit;
};

// GPUd's nine metrics in its order, then the ones dcgm-exporter's DCGM_FI_PROF_* fields need
// (graphics engine, SM activity, DRAM bandwidth, PCIe rates).
inline constexpr std::array<GpmMetricSpec, 14> kGpmMetrics = {{
    {NVML_GPM_METRIC_SM_OCCUPANCY, "sm_occupancy", GpmUnit::kPercent},
    {NVML_GPM_METRIC_INTEGER_UTIL, "int_util", GpmUnit::kPercent},
    {NVML_GPM_METRIC_ANY_TENSOR_UTIL, "any_tensor_util", GpmUnit::kPercent},
    {NVML_GPM_METRIC_DFMA_TENSOR_UTIL, "dfma_tensor_util", GpmUnit::kPercent},
    {NVML_GPM_METRIC_HMMA_TENSOR_UTIL, "hmma_tensor_util", GpmUnit::kPercent},
    {NVML_GPM_METRIC_IMMA_TENSOR_UTIL, "imma_tensor_util", GpmUnit::kPercent},
    {NVML_GPM_METRIC_FP64_UTIL, "fp64_util", GpmUnit::kPercent},
    {NVML_GPM_METRIC_FP32_UTIL, "fp32_util", GpmUnit::kPercent},
    {NVML_GPM_METRIC_FP16_UTIL, "fp16_util", GpmUnit::kPercent},
    {NVML_GPM_METRIC_GRAPHICS_UTIL, "graphics_util", GpmUnit::kPercent},
    {NVML_GPM_METRIC_SM_UTIL, "sm_util", GpmUnit::kPercent},
    {NVML_GPM_METRIC_DRAM_BW_UTIL, "dram_bw_util", GpmUnit::kPercent},
    {NVML_GPM_METRIC_PCIE_TX_PER_SEC, "pcie_tx", GpmUnit::kMebibytesPerSecond},
    {NVML_GPM_METRIC_PCIE_RX_PER_SEC, "pcie_rx", GpmUnit::kMebibytesPerSecond},
}};

}  // namespace gpud::nvml
