// Runs a program with a deadline and captures its output: how components read what only a command
// tells (systemctl, tailscale), with no shell and without waiting on one that hangs.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace gpud::host {

struct CommandOutput {
  int exit_code = -1;  // the exit status; -1 when a signal ended the program
  std::string out;     // stdout, at most max_output bytes
  std::string err;     // stderr, at most max_output bytes
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

// Error::code of run_command's error when the program ran past its deadline (the other errors have
// code 0).
inline constexpr int kCommandTimedOut = 504;

// Runs argv (argv[0] looked up with find_executable) with stdin from /dev/null, in a process group
// of its own, with default signal handling and no signal blocked. At the deadline the whole group
// is killed (SIGKILL) and the result is the error "`<argv>` timed out after <n> ms" (code
// kCommandTimedOut). A program that cannot be found or started is an error too; a non-zero exit
// status is not. Output past max_output bytes is read and dropped.
[[nodiscard]] Result<CommandOutput> run_command(const std::vector<std::string>& argv,
                                                std::string_view search_path,
                                                std::chrono::milliseconds timeout,
                                                size_t max_output = size_t{1} << 20);

}  // namespace gpud::host
