// Small helpers the NVIDIA (B) components share: the single-state result with extra_info {"data"},
// a plain-text table for `gpud scan`, and GPUd's list of CUDA environment variables that must not
// be set on a production node.
#pragma once

#include <algorithm>
#include <array>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "components/nvidia/gpu_issues.h"
#include "core/health.h"

namespace gpud::components {

// GPUd's "bad" CUDA environment variables (§2.2.8): debuggers, profilers, injection and core dumps
// that slow or change every CUDA process.
inline constexpr std::array<std::string_view, 10> kBadCudaEnvVars = {
    "NSIGHT_CUDA_DEBUGGER",
    "CUDA_INJECTION32_PATH",
    "CUDA_INJECTION64_PATH",
    "CUDA_AUTO_BOOST",
    "CUDA_ENABLE_COREDUMP_ON_EXCEPTION",
    "CUDA_COREDUMP_FILE",
    "CUDA_DEVICE_WAITS_ON_EXCEPTION",
    "CUDA_PROFILE",
    "COMPUTE_PROFILE",
    "OPENCL_PROFILE",
};

inline bool is_bad_cuda_env_var(std::string_view key) {
  return std::find(kBadCudaEnvVars.begin(), kBadCudaEnvVars.end(), key) != kBadCudaEnvVars.end();
}

// One state with extra_info {"data": <data>} and a detail block.
inline CheckResult b_result(std::string_view component, Health health, std::string reason,
                            const nlohmann::json& data, std::string detail,
                            std::optional<SuggestedActions> actions = std::nullopt) {
  auto r = single_state(component, health, std::move(reason), std::move(actions),
                        {{"data", data.dump()}});
  r.detail = std::move(detail);
  return r;
}

}  // namespace gpud::components
