// The configuration file (`--config`, default /etc/gpud/gpud.yaml): a YAML map from `gpud run`
// flag names (without "--") to their values, so that Ansible, Kubernetes ConfigMaps and `gpud up`
// can hold every flag, the JSON-valued ones as structured values. Flags on the command line
// override the file; a key that is no `gpud run` flag is an error that names it.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace gpud::app {

inline constexpr const char* kDefaultConfigPath = "/etc/gpud/gpud.yaml";

// One key of the file: the flag it sets, its values as that flag's command-line text (a map or a
// list of maps becomes one JSON text; a list of scalars becomes one value per item), and where it
// was written.
struct ConfigEntry {
  std::string flag;  // "gpu-count" ("gpu_count" is read as the same)
  std::vector<std::string> values;
  int line = 0;  // 1-based
};

// Parses the file's text; `source` names it in errors ("/etc/gpud/gpud.yaml:3: ..."). An empty
// file, or one holding only comments, sets nothing; a key without a value is skipped.
[[nodiscard]] Result<std::vector<ConfigEntry>> parse_config_yaml(std::string_view text,
                                                                 const std::string& source);

// Adds --config to a verb that reads the file (`run`, `scan`).
void add_config_option(CLI::App& cmd, std::string& path);

// Reads the --config file and sets the options of `cmd` that the command line did not give. ""
// reads nothing; the default path may be missing, a path the user named may not. Every key must be
// a `gpud run` flag; keys that `cmd` lacks (a run-only flag read by `scan`) are skipped.
[[nodiscard]] Result<void> apply_config_file(CLI::App& cmd, const std::string& path);

// The file `gpud up` writes: the shipped commented default, then the given `gpud run` flags as
// YAML (JSON-valued flags as structured values). Errors name a flag `gpud run` does not have.
[[nodiscard]] Result<std::string> render_config_yaml(const std::vector<std::string>& flags);

}  // namespace gpud::app
