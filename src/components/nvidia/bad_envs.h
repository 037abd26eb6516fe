// accelerator-nvidia-bad-envs: GPUd's bad CUDA environment variables set machine-wide, in
// /etc/environment, systemd's default environment (system.conf and system.conf.d/*.conf) or gpud's
// own environment. Supported only where an NVIDIA GPU is present.
#pragma once

#include <algorithm>
#include <array>
#include <string>
#include <string_view>
#include <vector>

#include "components/component.h"
#include "components/nvidia/verdict.h"
#include "host/host_fs.h"

namespace gpud::components {

inline constexpr std::string_view kBadEnvsName = "accelerator-nvidia-bad-envs";

// GPUd's "bad" CUDA environment variables (§2.2.8): debuggers, profilers, injection and core dumps
// that slow or change every CUDA process. Also what accelerator-nvidia-processes looks for in each
// GPU process's environment.
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

struct BadEnvFinding {
  std::string variable;
  std::string value;
  std::string where;  // "/etc/environment", "/etc/systemd/system.conf", "gpud environment"
  bool operator==(const BadEnvFinding&) const = default;
};

// KEY=VALUE lines (optionally "export KEY=VALUE", quoted values, # comments).
std::vector<BadEnvFinding> bad_envs_in_environment_file(std::string_view text,
                                                        const std::string& where);
// DefaultEnvironment= lines of a systemd manager config ("A=1 \"B=two words\"").
std::vector<BadEnvFinding> bad_envs_in_systemd_conf(std::string_view text,
                                                    const std::string& where);
// "KEY=VALUE" entries (e.g. the process environment).
std::vector<BadEnvFinding> bad_envs_in_list(const std::vector<std::string>& entries,
                                            const std::string& where);
// Gathers every finding through the host root plus gpud's own environment (`environ`).
std::vector<BadEnvFinding> collect_bad_envs(const host::HostFs& fs, char** own_environ);

// The rule: any finding ⇒ Degraded naming variable and place.
NvidiaVerdict evaluate_bad_envs(const std::vector<BadEnvFinding>& findings);

class BadEnvsComponent : public Component {
 public:
  explicit BadEnvsComponent(const ComponentContext& ctx);
  std::string_view name() const override { return kBadEnvsName; }
  std::vector<std::string> tags() const override;
  bool supported() const override;
  std::chrono::seconds interval() const override { return config().nvidia_check_interval; }
  CheckResult check() override;

 private:
  host::HostFs fs_;
};

}  // namespace gpud::components
