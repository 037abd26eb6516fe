// The configuration file (`--config`, default /etc/gpud/gpud.yaml): a YAML map from `gpud run`
// flag names (without "--") to their values, so that Ansible, Kubernetes ConfigMaps and `gpud up`
// can hold every flag, the JSON-valued ones as structured values. Flags on the command line
// override the file; a key that is no `gpud run` flag is an error that names it.
#pragma once

#include <CLI/CLI.hpp>
#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace gpud::app {

inline constexpr const char* kDefaultConfigPath = "/etc/gpud/gpud.yaml";
// A configuration file larger than this is refused (a few KiB is typical); so is one without end,
// such as a link to /dev/zero, after reading this much of it.
inline constexpr size_t kMaxConfigBytes = 1 << 20;

// One key of the file: the flag it sets, its values as that flag's command-line text (a map or a
// list of maps becomes one JSON text; a list of scalars becomes one value per item), and where it
// was written.
struct ConfigEntry {
  std::string flag;  // "gpu-count" ("gpu_count" is read as the same)
  std::vector<std::string> values;
  int line = 0;  // 1-based
};

// Parses the file's text; `source` names it in errors ("/etc/gpud/gpud.yaml:3: ..."). An empty
// file, or one holding only comments, sets nothing; a key without a value is skipped. YAML aliases
// (*name) are refused: a few hundred bytes of nested ones stand for billions of values. With
// `is_flag`, a key it rejects is an "unknown key" error before its value is read.
[[nodiscard]] Result<std::vector<ConfigEntry>> parse_config_yaml(
    std::string_view text, const std::string& source,
    const std::function<bool(const std::string& flag)>& is_flag = nullptr);

// Adds --config to a verb that reads the file (`run`, `scan`).
void add_config_option(CLI::App& cmd, std::string& path);

// Reads the --config file (at most kMaxConfigBytes) and sets the options of `cmd` that the command
// line did not give. "" reads nothing; the default path may be missing, a path the user named may
// not. Every key must be
// a `gpud run` flag; keys that `cmd` lacks (a run-only flag read by `scan`) are skipped.
[[nodiscard]] Result<void> apply_config_file(CLI::App& cmd, const std::string& path);

// The file `gpud up` writes: the shipped commented default, then the given `gpud run` flags as
// YAML (JSON-valued flags as structured values). Errors name a flag `gpud run` does not have.
[[nodiscard]] Result<std::string> render_config_yaml(const std::vector<std::string>& flags);

}  // namespace gpud::app
