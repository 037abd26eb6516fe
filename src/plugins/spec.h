// Custom plugin specs: GPUd's YAML format (a list of plugin_name, plugin_type, run_mode, tags,
// timeout, interval, component_list, health_state_plugin{steps, parser}) read into validated,
// expanded specs, one per component. Errors name the file and line, the plugin and the field.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "plugins/jsonpath.h"

namespace re2 {
class RE2;
}

namespace gpud::plugins {

inline constexpr const char* kDefaultSpecsFile = "/etc/default/gpud.plugins.yaml";
inline constexpr size_t kMaxPluginNameLength = 128;
inline constexpr std::chrono::seconds kDefaultTimeout{60};
inline constexpr std::chrono::seconds kMinInterval{60};

enum class PluginType { kInit, kComponent };

// A regular expression as the spec wrote it, compiled (RE2: the syntax of Go's regexp, which GPUd
// uses). Matches anywhere in the value, as Go's MatchString does.
struct Pattern {
  std::string text;
  std::shared_ptr<const re2::RE2> re;
  bool matches(std::string_view value) const;
};

// One parser.json_paths entry: the value at `query` becomes extra_info[field]; a value that does
// not match `expect` (or is missing while `expect` is set) makes the check Unhealthy; a value that
// matches a suggested_actions pattern suggests that repair action.
struct JsonPathRule {
  std::string query;
  JsonPath path;
  std::string field;
  std::optional<Pattern> expect;
  std::vector<std::pair<std::string, Pattern>> suggested_actions;  // action name (REBOOT_SYSTEM)
};

struct Step {
  std::string name;
  std::string script;  // decoded (content_type base64 is decoded at load)
  std::string content_type = "plaintext";
};

// One component's spec, after component_list expansion.
struct Spec {
  std::string plugin_name;
  std::string component_name;  // plugin_name lower-cased, spaces as '-'
  PluginType type = PluginType::kComponent;
  std::string run_mode;  // "auto" (the default) or "manual"
  std::vector<std::string> tags;
  std::chrono::milliseconds timeout = kDefaultTimeout;
  std::chrono::milliseconds interval{0};  // 0: once at start (auto) or on demand (manual)
  std::vector<Step> steps;
  std::vector<JsonPathRule> json_paths;  // empty: no parser
  std::string source;                    // "file:line" where the spec (or its list entry) is
  // A component_list entry's parameter (after its ':'), which the scripts read from the environment
  // (kParamEnv, and GPUd's PAR and PAR1), never pasted into their text.
  std::string param;
  bool manual() const { return run_mode == "manual"; }
};

// GPUd's component name for a plugin name: lower case, spaces as '-'.
std::string component_name_of(std::string_view plugin_name);
// The plugin's gauges' prefix: the component name with every character that a Prometheus metric
// name cannot hold as '_' ("nvidia-smi-query" -> "nvidia_smi_query").
std::string metric_prefix_of(std::string_view component_name);
std::string_view to_string(PluginType t);

// Parses a specs file's text: a YAML list of specs (a single spec map is read as a list of one).
// `source` names the file in errors and is where relative component_list_file paths start from
// (its directory). An unknown field, a wrong type or a bad value is an error naming the plugin,
// the field and source:line.
[[nodiscard]] Result<std::vector<Spec>> parse_specs(std::string_view yaml_text,
                                                    const std::string& source);
// Reads and parses a specs file. A missing file is an error unless `missing_ok` (the default path,
// which no plugins at all is fine for): then no specs.
[[nodiscard]] Result<std::vector<Spec>> load_specs_file(const std::string& path, bool missing_ok);

// GET /v1/plugins' shape of a spec (GPUd's field names; the script as plaintext).
nlohmann::json to_json(const Spec& spec);

}  // namespace gpud::plugins
