// The GPM metrics gpud reports: NVML metric id and GPUd's name for it. Shared by the sampler and by
// the fake library's scenario keys (testing/fake_nvml), so both spell them the same way.
#pragma once

#include <array>

#include "nvml/abi.h"

namespace gpud::nvml {

struct GpmMetricSpec {
  unsigned int id;   // NVML_GPM_METRIC_*
  const char* name;  // metric name suffix, GPUd's: "sm_occupancy", "fp32_util", ...
};

// The nine metrics GPUd reports, in its order.
inline constexpr std::array<GpmMetricSpec, 9> kGpmMetrics = {{
    {NVML_GPM_METRIC_SM_OCCUPANCY, "sm_occupancy"},
    {NVML_GPM_METRIC_INTEGER_UTIL, "int_util"},
    {NVML_GPM_METRIC_ANY_TENSOR_UTIL, "any_tensor_util"},
    {NVML_GPM_METRIC_DFMA_TENSOR_UTIL, "dfma_tensor_util"},
    {NVML_GPM_METRIC_HMMA_TENSOR_UTIL, "hmma_tensor_util"},
    {NVML_GPM_METRIC_IMMA_TENSOR_UTIL, "imma_tensor_util"},
    {NVML_GPM_METRIC_FP64_UTIL, "fp64_util"},
    {NVML_GPM_METRIC_FP32_UTIL, "fp32_util"},
    {NVML_GPM_METRIC_FP16_UTIL, "fp16_util"},
}};

}  // namespace gpud::nvml
