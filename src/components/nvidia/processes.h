// accelerator-nvidia-processes: the processes running on each GPU, NVML's compute and graphics
// lists (pid, type, used memory, and from /proc/<pid> the name, the container and pod it runs in
// and the names of GPUd's bad CUDA environment variables set in it, which it flags). Command lines
// carry the jobs' secrets (`--hf-token ...`): they are served only with --serve-process-cmdlines,
// and then with the values of secret-looking flags redacted.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "components/nvidia/nvidia_component.h"
#include "components/nvidia/verdict.h"
#include "host/host_fs.h"
#include "runtimes/attribution.h"

namespace gpud::components {

inline constexpr std::string_view kProcessesName = "accelerator-nvidia-processes";
inline constexpr int kProcessesErrorThreshold = 5;  // consecutive checks with NVML errors

// What /proc says about one GPU process; nullopt when it vanished.
struct ProcInfo {
  std::string name;  // /proc/<pid>/comm, the kernel's name of it ("" when unreadable)
  // Its command line, redacted (host::redact_command_line); nullopt unless command lines are
  // served.
  std::optional<std::vector<std::string>> cmdline;
  std::vector<std::string> bad_env_vars;  // names of kBadCudaEnvVars set in its environment
  // Its container and pod (runtimes/attribution.h); nullopt for a process in no container.
  std::optional<runtimes::Attribution> container;
};

// nvidia-smi's process type: "C" (compute), "G" (graphics) or "C+G".
std::string_view process_type(const nvml::Process& p);

// The CONTAINER cell of the scan table: "namespace/pod/container", else the container id's first
// 12 digits, else "-".
std::string container_cell(const std::optional<runtimes::Attribution>& a);

// Reads /proc/<pid>/comm, /proc/<pid>/environ and, when `with_cmdline`, /proc/<pid>/cmdline
// (redacted) through the host root; nullopt when the process is gone (a file that cannot be read
// leaves its field empty: no name, no command line, no variable flagged).
std::optional<ProcInfo> read_proc_info(const host::HostFs& fs, uint32_t pid,
                                       bool with_cmdline = false);
// The bad CUDA variables set in a NUL-separated environ block.
std::vector<std::string> bad_env_vars_in_environ(std::string_view environ_block);

// The rule. `procs` maps pid -> what /proc said (absent or nullopt: vanished, skipped in the
// data). `consecutive_errors` counts checks in a row (this one included) with a generic NVML
// error.
NvidiaVerdict evaluate_processes(const nvml::NvmlSnapshot& snapshot,
                                 const std::map<uint32_t, std::optional<ProcInfo>>& procs,
                                 int consecutive_errors);
// True when any GPU's process list answered an error other than NOT_SUPPORTED.
bool processes_have_error(const nvml::NvmlSnapshot& snapshot);

class ProcessesComponent : public NvidiaComponent {
 public:
  explicit ProcessesComponent(const ComponentContext& ctx);
  std::string_view name() const override { return kProcessesName; }

 protected:
  CheckResult evaluate(const nvml::NvmlSnapshot& snapshot) override;

 private:
  host::HostFs fs_;
  int consecutive_errors_ = 0;
};

}  // namespace gpud::components
