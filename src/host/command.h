// The one subprocess runner: a program with a deadline, in a process group of its own that is
// killed whole, with capped output and cancellation from another thread. How components read what
// only a command tells (systemctl, tailscale), and how a plugin's bash script runs (plugins/).
#pragma once

#include <atomic>
#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace gpud::host {

struct CommandOutput {
  int exit_code = -1;   // the exit status; -1 when a signal ended the program
  int term_signal = 0;  // the signal that ended it (SIGKILL at the deadline), 0 when it exited
  std::string out;      // stdout (with stderr when merged), at most max_output bytes
  std::string err;      // stderr, at most max_output bytes; empty when merged
  size_t discarded_bytes = 0;  // output read past max_output and dropped
  bool timed_out = false;      // killed at the deadline
  bool cancelled = false;      // killed because the cancel flag was set
  std::chrono::milliseconds duration{0};
};

// The standard search path used when the environment has no PATH.
inline constexpr std::string_view kDefaultSearchPath =
    "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

// `name` found as an executable regular file in the colon-separated `search_path` (empty entries
// skipped); a name with a '/' is taken as a path. nullopt when there is none.
std::optional<std::string> find_executable(std::string_view name, std::string_view search_path);

// `name` as the host has it installed: on gpud's own `search_path`, or, where gpud sees the host
// under a root other than "/" (in a container, --host-root=/host), in the standard system
// directories (kDefaultSearchPath) under `host_root` and under each of `host_roots_within` there
// (the GPU Operator's driver root, /run/nvidia/driver). Under a root, a symbolic link counts as
// installed whatever it points to (its target is the host's path, not the container's). For
// knowing what is installed; what is found under a root is not run.
std::optional<std::string> find_host_executable(
    std::string_view host_root, std::string_view name, std::string_view search_path,
    const std::vector<std::string>& host_roots_within = {});

// What run_process runs, and how.
struct ProcessSpec {
  std::vector<std::string> argv;  // argv[0] looked up with find_executable in search_path
  std::string search_path{kDefaultSearchPath};
  std::chrono::milliseconds timeout{60'000};
  // Bytes kept of each output (of the one output when merge_stderr); the rest is read and dropped,
  // so that a chatty program neither blocks on a full pipe nor fills memory.
  size_t max_output = size_t{1} << 20;
  bool merge_stderr = false;  // stderr into the same pipe as stdout, interleaved as written
  // The program's whole environment ("NAME=value" each); nullopt: the daemon's own.
  std::optional<std::vector<std::string>> environment;
  // A descriptor the program gets as its fd 3 (a script bash reads as /proc/self/fd/3); -1: none.
  int fd3 = -1;
  // Set from another thread (a deregistered plugin, the daemon stopping): the group is killed
  // within 50 ms.
  const std::atomic<bool>* cancel = nullptr;
};

// Runs spec.argv with stdin from /dev/null, default signal handling and no signal blocked, in a
// process group of its own, and no descriptor of the daemon's but 0-2 (and 3 when given). Returns
// when the program has exited and its group is gone: what it left running in its group is killed
// then (a background job does not outlive its run). At the deadline, or when spec.cancel is set,
// the whole group is killed (SIGKILL) and the output so far returned with timed_out / cancelled.
// An error only when the program cannot be found or started; a non-zero exit status is not one.
[[nodiscard]] Result<CommandOutput> run_process(const ProcessSpec& spec);

// Error::code of run_command's error when the program ran past its deadline, and when it was
// cancelled (the other errors have code 0).
inline constexpr int kCommandTimedOut = 504;
inline constexpr int kCommandCancelled = 499;

// run_process of argv with the daemon's environment and stdout and stderr apart, for callers that
// want the answer or an error: past the deadline the error is "`<argv>` timed out after <n> ms"
// (code kCommandTimedOut), a cancelled run "`<argv>` was cancelled" (code kCommandCancelled).
[[nodiscard]] Result<CommandOutput> run_command(const std::vector<std::string>& argv,
                                                std::string_view search_path,
                                                std::chrono::milliseconds timeout,
                                                size_t max_output = size_t{1} << 20,
                                                const std::atomic<bool>* cancel = nullptr);

}  // namespace gpud::host
