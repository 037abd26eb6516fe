// Runs one plugin step's bash script through the host's one subprocess runner (host/command.h's
// run_process): /bin/bash reads the script from a memory file (never a shell string built from the
// spec), in a process group of its own with a minimal environment, killed whole at the deadline or
// on cancellation; its output (stdout and stderr together) is read to the end, and only the first
// bytes are kept so that a chatty script neither blocks on a full pipe nor fills memory.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <string>

namespace gpud::plugins {

inline constexpr size_t kMaxOutputBytes = 4096;
// The environment variable that holds a component_list entry's parameter. GPUd's scripts name it
// ${PAR} (or ${PAR1}) and the entry's name ${NAME}: those are set too, so that bash expands them as
// variables (data, never parsed as shell text) where GPUd pasted the text into the script.
inline constexpr const char* kParamEnv = "GPUD_PLUGIN_PARAM";

struct ScriptOptions {
  std::chrono::milliseconds timeout{60'000};
  size_t max_output_bytes = kMaxOutputBytes;
  // The script's PATH ("" : host::kDefaultSearchPath); its environment holds only PATH, HOME=/,
  // LANG=C.UTF-8, GPUD_PLUGIN_NAME and NAME (plugin_name), GPUD_PLUGIN_PARAM, PAR and PAR1
  // (plugin_param), and GPUD_HOST_ROOT.
  std::string path;
  std::string plugin_name;
  std::string plugin_param;
  // The daemon's --host-root, as GPUD_HOST_ROOT: where a script in the container image finds the
  // host's files (the host's mount table is <root>/proc/1/mounts).
  std::string host_root = "/";
  std::string bash = "/bin/bash";
  // Set from another thread (a deregistered plugin): the script is killed at once.
  const std::atomic<bool>* cancel = nullptr;
};

struct ScriptResult {
  int exit_code = -1;  // bash's exit status; 128+N when killed by signal N
  bool timed_out = false;
  bool cancelled = false;
  std::string error;           // the script could not be started (no bash, spawn failed)
  std::string output;          // the first max_output_bytes of stdout and stderr
  size_t discarded_bytes = 0;  // output read past that and dropped
  std::chrono::milliseconds duration{0};
  bool ok() const { return error.empty() && !timed_out && !cancelled && exit_code == 0; }
};

// Runs `script` and returns when bash has exited and the process group is gone (every process
// still in it once bash exits is killed too: a plugin's background job does not outlive its run),
// or at the deadline, when the whole group is killed with SIGKILL.
ScriptResult run_bash_script(const std::string& script, const ScriptOptions& options);

}  // namespace gpud::plugins
