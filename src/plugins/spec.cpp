#include "plugins/spec.h"

#include <re2/re2.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <filesystem>
#include <set>
#include <sstream>

#include "core/base64.h"
#include "core/files.h"
#include "core/health.h"
#include "core/strings.h"
#include "core/time_util.h"
#include "core/yaml_text.h"

namespace gpud::plugins {

bool Pattern::matches(std::string_view value) const {
  return re != nullptr && re2::RE2::PartialMatch(value, *re);
}

std::string component_name_of(std::string_view plugin_name) {
  std::string out;
  for (char c : plugin_name)
    out += c == ' ' ? '-' : static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string metric_prefix_of(std::string_view component_name) {
  std::string out;
  for (char c : component_name)
    out += std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_' ? c : '_';
  if (out.empty() || std::isdigit(static_cast<unsigned char>(out[0])) != 0) out.insert(0, "_");
  return out;
}

std::string_view to_string(PluginType t) { return t == PluginType::kInit ? "init" : "component"; }

namespace {

constexpr size_t kMaxListFileBytes = size_t{1} << 20;
// A specs file is a few KiB; one without end (a link to /dev/zero) stops here.
constexpr size_t kMaxSpecsBytes = size_t{4} << 20;

// Where errors point: the file, the node's line, the plugin and the field.
struct Context {
  const std::string& source;
  std::string plugin;  // "" until plugin_name is read

  Error fail(const YAML::Node& node, std::string_view field, std::string_view what) const {
    std::string where = source;
    const YAML::Mark mark = node.IsDefined() ? node.Mark() : YAML::Mark::null_mark();
    if (!mark.is_null()) where += ":" + std::to_string(mark.line + 1);
    std::string msg = where + ": ";
    if (!plugin.empty()) msg += "plugin \"" + plugin + "\": ";
    if (!field.empty()) msg += "field \"" + std::string(field) + "\": ";
    return make_error(msg + std::string(what));
  }
  std::string line_of(const YAML::Node& node) const {
    const YAML::Mark mark = node.Mark();
    return mark.is_null() ? source : source + ":" + std::to_string(mark.line + 1);
  }
};

// Every key of `map` must be one of `known`; an unknown one is an error naming it (a typo such as
// "scripts" must not silently drop the check).
Result<void> check_keys(const Context& cx, const YAML::Node& map, std::string_view where,
                        std::initializer_list<std::string_view> known) {
  for (const auto& kv : map) {
    if (!kv.first.IsScalar()) return cx.fail(kv.first, where, "a key must be a plain name");
    const std::string& key = kv.first.Scalar();
    if (std::find(known.begin(), known.end(), key) != known.end()) continue;
    std::string field = where.empty() ? key : std::string(where) + "." + key;
    std::string list;
    for (std::string_view k : known) list += (list.empty() ? "" : ", ") + std::string(k);
    return cx.fail(kv.first, field, "unknown field (known here: " + list + ")");
  }
  return {};
}

Result<std::string> scalar(const Context& cx, const YAML::Node& n, std::string_view field) {
  if (!n.IsDefined() || n.IsNull()) return std::string();
  if (!n.IsScalar()) return cx.fail(n, field, "must be a single value, not a list or map");
  return n.Scalar();
}

Result<std::vector<std::string>> string_list(const Context& cx, const YAML::Node& n,
                                             std::string_view field) {
  std::vector<std::string> out;
  if (!n.IsDefined() || n.IsNull()) return out;
  if (!n.IsSequence()) return cx.fail(n, field, "must be a list");
  for (const auto& item : n) {
    if (!item.IsScalar()) return cx.fail(item, field, "each item must be a single value");
    out.push_back(item.Scalar());
  }
  return out;
}

Result<std::chrono::milliseconds> duration(const Context& cx, const YAML::Node& n,
                                           std::string_view field) {
  auto text = scalar(cx, n, field);
  if (!text) return text.error();
  if (text->empty()) return std::chrono::milliseconds(0);
  auto d = parse_duration(*text);
  if (!d) return cx.fail(n, field, "\"" + *text + "\" is not a duration (e.g. 30s, 1m, 1h30m)");
  return *d;
}

Result<Pattern> pattern(const Context& cx, const YAML::Node& n, std::string_view field) {
  if (!n.IsMap()) return cx.fail(n, field, "must be a map with a regex (regex: \"...\")");
  if (auto r = check_keys(cx, n, field, {"regex"}); !r) return r.error();
  auto text = scalar(cx, n["regex"], std::string(field) + ".regex");
  if (!text) return text.error();
  if (text->empty()) return cx.fail(n, std::string(field) + ".regex", "is required");
  RE2::Options opts;
  opts.set_log_errors(false);
  auto re = std::make_shared<const re2::RE2>(*text, opts);
  if (!re->ok())
    return cx.fail(n["regex"], std::string(field) + ".regex",
                   "not a valid regular expression: " + re->error());
  return Pattern{*text, std::move(re)};
}

// A spec as written, before component_list expansion.
struct RawSpec {
  Spec spec;
  bool is_list = false;
  std::vector<std::string> component_list;
  std::string component_list_file;
  YAML::Node node;
  YAML::Node list_node;
};

Result<std::vector<Step>> parse_steps(const Context& cx, const YAML::Node& n) {
  const std::string f = "health_state_plugin.steps";
  if (!n.IsDefined() || n.IsNull() || !n.IsSequence() || n.size() == 0)
    return cx.fail(n.IsDefined() ? n : YAML::Node(), f, "at least one step is required");
  std::vector<Step> steps;
  for (size_t i = 0; i < n.size(); ++i) {
    const YAML::Node s = n[i];
    const std::string sf = f + "[" + std::to_string(i) + "]";
    if (!s.IsMap()) return cx.fail(s, sf, "a step must be a map (name, run_bash_script)");
    if (auto r = check_keys(cx, s, sf, {"name", "run_bash_script"}); !r) return r.error();
    Step step;
    auto name = scalar(cx, s["name"], sf + ".name");
    if (!name) return name.error();
    if (name->empty()) return cx.fail(s, sf + ".name", "is required");
    step.name = *name;
    const YAML::Node bash = s["run_bash_script"];
    const std::string bf = sf + ".run_bash_script";
    if (!bash.IsDefined() || !bash.IsMap())
      return cx.fail(bash.IsDefined() ? bash : s, bf, "is required (content_type, script)");
    if (auto r = check_keys(cx, bash, bf, {"content_type", "script"}); !r) return r.error();
    auto type = scalar(cx, bash["content_type"], bf + ".content_type");
    if (!type) return type.error();
    auto script = scalar(cx, bash["script"], bf + ".script");
    if (!script) return script.error();
    if (trim(*script).empty()) return cx.fail(bash, bf + ".script", "is required");
    if (type->empty() || *type == "plaintext") {
      step.script = *script;
    } else if (*type == "base64") {
      bool ok = false;
      step.script = decode_base64(*script, ok);
      if (!ok) return cx.fail(bash["script"], bf + ".script", "is not valid base64");
      step.content_type = "base64";
    } else {
      return cx.fail(bash["content_type"], bf + ".content_type",
                     "\"" + *type + "\" is not plaintext or base64");
    }
    steps.push_back(std::move(step));
  }
  return steps;
}

Result<std::vector<JsonPathRule>> parse_parser(const Context& cx, const YAML::Node& n) {
  const std::string f = "health_state_plugin.parser";
  std::vector<JsonPathRule> rules;
  if (!n.IsDefined() || n.IsNull()) return rules;
  if (!n.IsMap()) return cx.fail(n, f, "must be a map (json_paths)");
  if (n["log_path"].IsDefined())
    return cx.fail(n["log_path"], f + ".log_path",
                   "is not supported by gpud (the run's output is kept in the state's raw_output "
                   "and its health changes in the component's events)");
  if (auto r = check_keys(cx, n, f, {"json_paths"}); !r) return r.error();
  const YAML::Node paths = n["json_paths"];
  if (!paths.IsDefined() || !paths.IsSequence() || paths.size() == 0)
    return cx.fail(paths.IsDefined() ? paths : n, f + ".json_paths",
                   "a parser needs a list of json_paths");
  for (size_t i = 0; i < paths.size(); ++i) {
    const YAML::Node p = paths[i];
    const std::string pf = f + ".json_paths[" + std::to_string(i) + "]";
    if (!p.IsMap())
      return cx.fail(p, pf, "must be a map (query, field, expect, suggested_actions)");
    if (auto r = check_keys(cx, p, pf, {"query", "field", "expect", "suggested_actions"}); !r)
      return r.error();
    JsonPathRule rule;
    auto query = scalar(cx, p["query"], pf + ".query");
    if (!query) return query.error();
    if (query->empty()) return cx.fail(p, pf + ".query", "is required");
    auto compiled = JsonPath::compile(*query);
    if (!compiled) return cx.fail(p["query"], pf + ".query", compiled.error().message);
    rule.query = *query;
    rule.path = std::move(*compiled);
    auto field = scalar(cx, p["field"], pf + ".field");
    if (!field) return field.error();
    if (field->empty()) return cx.fail(p, pf + ".field", "is required");
    rule.field = *field;
    if (p["expect"].IsDefined() && !p["expect"].IsNull()) {
      auto e = pattern(cx, p["expect"], pf + ".expect");
      if (!e) return e.error();
      rule.expect = std::move(*e);
    }
    const YAML::Node actions = p["suggested_actions"];
    if (actions.IsDefined() && !actions.IsNull()) {
      if (!actions.IsMap())
        return cx.fail(actions, pf + ".suggested_actions",
                       "must be a map of repair actions to patterns (REBOOT_SYSTEM: {regex: ...})");
      for (const auto& kv : actions) {
        const std::string name = kv.first.Scalar();
        const std::string af = pf + ".suggested_actions." + name;
        if (!parse_repair_action(name))
          return cx.fail(kv.first, af,
                         "not a repair action (IGNORE_NO_ACTION_REQUIRED, REBOOT_SYSTEM, "
                         "HARDWARE_INSPECTION, CHECK_USER_APP_AND_GPU)");
        auto e = pattern(cx, kv.second, af);
        if (!e) return e.error();
        rule.suggested_actions.emplace_back(name, std::move(*e));
      }
    }
    rules.push_back(std::move(rule));
  }
  return rules;
}

Result<RawSpec> parse_one(const Context& outer, const YAML::Node& n, size_t index) {
  Context cx{outer.source, ""};
  RawSpec raw;
  raw.node = n;
  if (!n.IsMap())
    return cx.fail(n, "", "plugin spec #" + std::to_string(index + 1) + " must be a map");
  Spec& s = raw.spec;
  s.source = cx.line_of(n);
  // The name first, so that every later error names the plugin.
  auto name = scalar(cx, n["plugin_name"], "plugin_name");
  if (!name) return name.error();
  if (name->empty())
    return cx.fail(n, "plugin_name", "is required (spec #" + std::to_string(index + 1) + ")");
  cx.plugin = *name;
  if (name->size() > kMaxPluginNameLength)
    return cx.fail(n["plugin_name"], "plugin_name",
                   "longer than " + std::to_string(kMaxPluginNameLength) + " characters");
  for (char c : *name)
    if (static_cast<unsigned char>(c) < 0x20 || c == '/' || c == 0x7f)
      return cx.fail(n["plugin_name"], "plugin_name", "must not contain control characters or '/'");
  s.plugin_name = *name;
  s.component_name = component_name_of(*name);
  if (auto r =
          check_keys(cx, n, "",
                     {"plugin_name", "plugin_type", "type", "run_mode", "tags", "timeout",
                      "interval", "component_list", "component_list_file", "health_state_plugin"});
      !r)
    return r.error();

  // GPUd's files spell the type "type"; the issue's and gpud's "plugin_type". Either, not both.
  if (n["type"].IsDefined() && n["plugin_type"].IsDefined())
    return cx.fail(n["type"], "type", "give plugin_type or type, not both");
  const YAML::Node type_node = n["plugin_type"].IsDefined() ? n["plugin_type"] : n["type"];
  auto type = scalar(cx, type_node, "plugin_type");
  if (!type) return type.error();
  if (*type == "init") {
    s.type = PluginType::kInit;
  } else if (*type == "component") {
    s.type = PluginType::kComponent;
  } else if (*type == "component_list") {
    s.type = PluginType::kComponent;
    raw.is_list = true;
  } else {
    return cx.fail(type_node.IsDefined() ? type_node : n, "plugin_type",
                   type->empty() ? "is required (init, component or component_list)"
                                 : "\"" + *type + "\" is not init, component or component_list");
  }

  auto mode = scalar(cx, n["run_mode"], "run_mode");
  if (!mode) return mode.error();
  if (!mode->empty() && *mode != "auto" && *mode != "manual")
    return cx.fail(n["run_mode"], "run_mode", "\"" + *mode + "\" is not auto or manual");
  s.run_mode = mode->empty() ? "auto" : *mode;
  if (s.type == PluginType::kInit && s.manual())
    return cx.fail(n["run_mode"], "run_mode", "an init plugin runs at start; it cannot be manual");

  auto tags = string_list(cx, n["tags"], "tags");
  if (!tags) return tags.error();
  s.tags = *tags;

  auto timeout = duration(cx, n["timeout"], "timeout");
  if (!timeout) return timeout.error();
  s.timeout = timeout->count() == 0 ? std::chrono::milliseconds(kDefaultTimeout) : *timeout;
  auto interval = duration(cx, n["interval"], "interval");
  if (!interval) return interval.error();
  if (interval->count() > 0 && *interval < kMinInterval)
    return cx.fail(n["interval"], "interval", "must be at least 1m when set (0 or unset: once)");
  s.interval = *interval;
  if (s.type == PluginType::kInit && s.interval.count() > 0)
    return cx.fail(n["interval"], "interval", "an init plugin runs once; it has no interval");

  auto list = string_list(cx, n["component_list"], "component_list");
  if (!list) return list.error();
  raw.component_list = *list;
  // yaml-cpp throws when a missing key's node is assigned (it may only be copied).
  if (n["component_list"].IsDefined()) raw.list_node = n["component_list"];
  auto list_file = scalar(cx, n["component_list_file"], "component_list_file");
  if (!list_file) return list_file.error();
  raw.component_list_file = *list_file;
  if (!raw.is_list && (!raw.component_list.empty() || !raw.component_list_file.empty()))
    return cx.fail(n, raw.component_list.empty() ? "component_list_file" : "component_list",
                   "only a component_list plugin has a component list");
  if (raw.is_list && !raw.component_list.empty() && !raw.component_list_file.empty())
    return cx.fail(n["component_list_file"], "component_list_file",
                   "give component_list or component_list_file, not both");
  if (raw.is_list && raw.component_list.empty() && raw.component_list_file.empty())
    return cx.fail(n, "component_list",
                   "a component_list plugin needs component_list or "
                   "component_list_file");

  const YAML::Node hsp = n["health_state_plugin"];
  if (!hsp.IsDefined() || !hsp.IsMap())
    return cx.fail(hsp.IsDefined() ? hsp : n, "health_state_plugin", "is required (steps)");
  if (auto r = check_keys(cx, hsp, "health_state_plugin", {"steps", "parser"}); !r)
    return r.error();
  auto steps = parse_steps(cx, hsp["steps"]);
  if (!steps) {
    if (!hsp["steps"].IsDefined())
      return cx.fail(hsp, "health_state_plugin.steps", "at least one step is required");
    return steps.error();
  }
  s.steps = std::move(*steps);
  auto rules = parse_parser(cx, hsp["parser"]);
  if (!rules) return rules.error();
  s.json_paths = std::move(*rules);
  return raw;
}

// One component_list entry: name[#run_mode[tag1,tag2]][:param] (GPUd's format).
struct ListEntry {
  std::string name;
  std::string param;
  std::string run_mode;
  std::optional<std::vector<std::string>> tags;
};

Result<ListEntry> parse_entry(std::string_view entry) {
  ListEntry e;
  std::string_view head = entry;
  if (size_t colon = entry.find(':'); colon != std::string_view::npos) {
    head = entry.substr(0, colon);
    e.param = std::string(entry.substr(colon + 1));
  }
  std::string_view mode;
  if (size_t hash = head.find('#'); hash != std::string_view::npos) {
    mode = head.substr(hash + 1);
    head = head.substr(0, hash);
  }
  e.name = std::string(trim(head));
  if (e.name.empty()) return make_error("a component name is required");
  const size_t open = mode.find('[');
  const size_t close = mode.find(']');
  if ((open == std::string_view::npos) != (close == std::string_view::npos) ||
      (open != std::string_view::npos && close < open))
    return make_error("unbalanced [] around the tags");
  if (open != std::string_view::npos) {
    std::vector<std::string> tags;
    std::string_view inner = mode.substr(open + 1, close - open - 1);
    while (!inner.empty()) {
      size_t comma = inner.find(',');
      std::string_view t = trim(inner.substr(0, comma));
      if (!t.empty()) tags.emplace_back(t);
      if (comma == std::string_view::npos) break;
      inner = inner.substr(comma + 1);
    }
    e.tags = std::move(tags);
    mode = mode.substr(0, open);
  }
  e.run_mode = std::string(trim(mode));
  if (!e.run_mode.empty() && e.run_mode != "auto" && e.run_mode != "manual")
    return make_error("run mode \"" + e.run_mode + "\" is not auto or manual");
  return e;
}

Result<void> expand(const Context& outer, const RawSpec& raw, std::vector<Spec>& out) {
  if (!raw.is_list) {
    out.push_back(raw.spec);
    return {};
  }
  Context cx{outer.source, raw.spec.plugin_name};
  struct Item {
    std::string text;
    std::string where;
  };
  std::vector<Item> items;
  if (!raw.component_list_file.empty()) {
    std::filesystem::path p(raw.component_list_file);
    if (p.is_relative()) p = std::filesystem::path(outer.source).parent_path() / p;
    // Bounded: a list of components is small, and a path such as /dev/zero must not fill memory.
    auto text = read_file(p.string(), kMaxListFileBytes);
    if (!text)
      return cx.fail(raw.node["component_list_file"], "component_list_file", text.error().message);
    std::istringstream in(*text);
    std::string line;
    int number = 0;
    while (std::getline(in, line)) {
      ++number;
      std::string_view t = trim(line);
      if (t.empty() || t.front() == '#') continue;
      if (first_non_text_line(t) > 0)
        return make_error(p.string() + ":" + std::to_string(number) + ": not valid UTF-8 text");
      items.push_back({std::string(t), p.string() + ":" + std::to_string(number)});
    }
    if (items.empty())
      return cx.fail(raw.node["component_list_file"], "component_list_file",
                     p.string() + " lists no component");
  } else {
    for (size_t i = 0; i < raw.component_list.size(); ++i)
      items.push_back({raw.component_list[i], cx.line_of(raw.list_node[i])});
  }
  for (const Item& item : items) {
    auto e = parse_entry(item.text);
    if (!e)
      return make_error(item.where + ": plugin \"" + raw.spec.plugin_name +
                        "\": field \"component_list\": entry \"" + item.text +
                        "\": " + e.error().message);
    Spec s = raw.spec;
    s.plugin_name = e->name;
    s.component_name = component_name_of(e->name);
    s.source = item.where;
    if (!e->run_mode.empty()) s.run_mode = e->run_mode;
    if (e->tags) s.tags = *e->tags;
    // The scripts stay as written: the parameter reaches them as data, in their environment.
    s.param = e->param;
    out.push_back(std::move(s));
  }
  return {};
}

}  // namespace

Result<std::vector<Spec>> parse_specs(std::string_view text, const std::string& source) {
  auto parsed = parse_yaml_text(text, source);
  if (!parsed) return parsed.error();
  const YAML::Node root = *parsed;
  std::vector<Spec> out;
  if (root.IsNull()) return out;
  Context cx{source, ""};
  try {
    std::vector<YAML::Node> nodes;
    if (root.IsMap()) {
      nodes.push_back(root);
    } else if (root.IsSequence()) {
      for (const auto& n : root) nodes.push_back(n);
    } else {
      return cx.fail(root, "", "must be a YAML list of plugin specs");
    }
    for (size_t i = 0; i < nodes.size(); ++i) {
      auto raw = parse_one(cx, nodes[i], i);
      if (!raw) return raw.error();
      if (auto r = expand(cx, *raw, out); !r) return r.error();
    }
  } catch (const YAML::Exception& e) {
    std::string where = source;
    if (!e.mark.is_null()) where += ":" + std::to_string(e.mark.line + 1);
    return make_error(where + ": " + e.msg);
  }
  std::set<std::string> names;
  for (const Spec& s : out)
    if (!names.insert(s.component_name).second)
      return make_error(s.source + ": plugin \"" + s.plugin_name +
                        "\": field \"plugin_name\": component name \"" + s.component_name +
                        "\" is used by another plugin");
  return out;
}

Result<std::vector<Spec>> load_specs_file(const std::string& path, bool missing_ok) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    if (missing_ok) return std::vector<Spec>{};
    return make_error("plugin specs file " + path + " does not exist");
  }
  auto text = read_file(path, kMaxSpecsBytes);
  if (!text) return make_error("plugin specs: " + text.error().message);
  return parse_specs(*text, path);
}

nlohmann::json to_json(const Spec& spec) {
  nlohmann::json steps = nlohmann::json::array();
  for (const Step& s : spec.steps)
    steps.push_back({{"name", s.name},
                     {"run_bash_script", {{"content_type", "plaintext"}, {"script", s.script}}}});
  nlohmann::json hsp = {{"steps", steps}};
  if (!spec.json_paths.empty()) {
    nlohmann::json paths = nlohmann::json::array();
    for (const JsonPathRule& r : spec.json_paths) {
      nlohmann::json p = {{"query", r.query}, {"field", r.field}};
      if (r.expect) p["expect"] = {{"regex", r.expect->text}};
      for (const auto& [action, pat] : r.suggested_actions)
        p["suggested_actions"][action] = {{"regex", pat.text}};
      paths.push_back(std::move(p));
    }
    hsp["parser"] = {{"json_paths", paths}};
  }
  return {
      {"plugin_name", spec.plugin_name},
      {"plugin_type", std::string(to_string(spec.type))},
      {"component_name", spec.component_name},
      {"run_mode", spec.run_mode},
      {"tags", spec.tags},
      {"timeout", format_duration(std::chrono::duration_cast<std::chrono::seconds>(spec.timeout))},
      {"interval",
       format_duration(std::chrono::duration_cast<std::chrono::seconds>(spec.interval))},
      {"health_state_plugin", hsp}};
}

}  // namespace gpud::plugins
