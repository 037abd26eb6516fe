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

// Runs argv (argv[0] looked up with find_executable) with stdin from /dev/null, in a process group
// of its own, with default signal handling and no signal blocked. At the deadline the whole group
// is killed (SIGKILL) and the result is the error "`<argv>` timed out after <n> ms". A program that
// cannot be found or started is an error too; a non-zero exit status is not.
[[nodiscard]] Result<CommandOutput> run_command(const std::vector<std::string>& argv,
                                                std::string_view search_path,
                                                std::chrono::milliseconds timeout,
                                                size_t max_output = size_t{1} << 20);

}  // namespace gpud::host
