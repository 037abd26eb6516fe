#include "app/config_file.h"

#include <yaml-cpp/yaml.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "app/deploy_files.h"
#include "app/options.h"
#include "core/files.h"
#include "core/parse_number.h"
#include "core/yaml_text.h"

namespace gpud::app {
namespace {

std::string where(const std::string& source, const YAML::Mark& mark) {
  return mark.is_null() ? source : source + ":" + std::to_string(mark.line + 1);
}

// A plain (unquoted) scalar keeps YAML's meaning (8 is a number, true a boolean); a quoted one is
// a string.
nlohmann::json scalar_json(const YAML::Node& n) {
  const std::string& s = n.Scalar();
  if (n.Tag() == "!") return s;
  if (s == "true" || s == "True" || s == "TRUE") return true;
  if (s == "false" || s == "False" || s == "FALSE") return false;
  if (s == "null" || s == "~" || s.empty()) return nullptr;
  if (auto i = parse_integer<int64_t>(s)) return *i;
  try {
    size_t used = 0;
    const double d = std::stod(s, &used);
    if (used == s.size()) return d;
  } catch (const std::exception&) {
  }
  return s;
}

nlohmann::json to_json(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Scalar: return scalar_json(n);
    case YAML::NodeType::Sequence: {
      auto a = nlohmann::json::array();
      for (const auto& item : n) a.push_back(to_json(item));
      return a;
    }
    case YAML::NodeType::Map: {
      auto o = nlohmann::json::object();
      for (const auto& kv : n) o[kv.first.Scalar()] = to_json(kv.second);
      return o;
    }
    default: return nullptr;
  }
}

// The command-line text of one value: a scalar as written, a map or list as JSON.
std::string flag_text(const YAML::Node& n) { return n.IsScalar() ? n.Scalar() : to_json(n).dump(); }

std::string flag_name(std::string key) {
  for (char& c : key)
    if (c == '_') c = '-';
  return key;
}

// A flag's text as a YAML string: plain where YAML reads it back as the same text, quoted where it
// would read as nothing ("", "null", "~").
void emit_text(YAML::Emitter& out, const std::string& v) {
  if (v.empty() || v == "null" || v == "Null" || v == "NULL" || v == "~")
    out << YAML::DoubleQuoted << v;
  else
    out << v;
}

}  // namespace

Result<std::vector<ConfigEntry>> parse_config_yaml(
    std::string_view text, const std::string& source,
    const std::function<bool(const std::string& flag)>& is_flag) {
  // Flag values become command-line text and JSON (JSON-valued flags), which must be UTF-8.
  auto parsed = parse_yaml_text(text, source);
  if (!parsed) return parsed.error();
  const YAML::Node root = *parsed;
  std::vector<ConfigEntry> out;
  if (root.IsNull()) return out;
  if (!root.IsMap())
    return make_error(source +
                      ": must be a map of `gpud run` flag names to values (e.g. \"gpu-count: 8\")");
  for (const auto& kv : root) {
    const YAML::Node& key = kv.first;
    const YAML::Node& value = kv.second;
    if (!key.IsScalar() || key.Scalar().empty())
      return make_error(where(source, key.Mark()) + ": a key must be a flag name");
    ConfigEntry e;
    e.flag = flag_name(key.Scalar());
    e.line = key.Mark().is_null() ? 0 : key.Mark().line + 1;
    if (e.flag.find_first_not_of('-') == std::string::npos)
      return make_error(where(source, key.Mark()) + ": a key must be a flag name");
    if (e.flag.starts_with("-"))
      return make_error(where(source, key.Mark()) + ": write the flag name without dashes (\"" +
                        e.flag.substr(e.flag.find_first_not_of('-')) + "\")");
    if (is_flag && !is_flag(e.flag))
      return make_error(where(source, key.Mark()) + ": unknown key \"" + e.flag +
                        "\" (not a `gpud run` flag; `gpud run --help` lists them)");
    if (value.IsNull()) continue;
    // A list of scalars is one value per item (a repeated flag, or a comma list); anything else
    // is one value.
    const bool scalars =
        value.IsSequence() &&
        std::all_of(value.begin(), value.end(), [](const YAML::Node& n) { return n.IsScalar(); });
    if (scalars) {
      for (const auto& item : value) e.values.push_back(item.Scalar());
    } else {
      e.values.push_back(flag_text(value));
    }
    out.push_back(std::move(e));
  }
  return out;
}

void add_config_option(CLI::App& cmd, std::string& path) {
  path = kDefaultConfigPath;
  cmd.add_option("--config", path,
                 "YAML file of `gpud run` flags (name: value); flags given here override it; \"\" "
                 "reads none")
      ->capture_default_str();
}

Result<void> apply_config_file(CLI::App& cmd, const std::string& path) {
  if (path.empty()) return {};
  const bool named = cmd.get_option("--config")->count() > 0;
  std::error_code ec;
  if (!named && !std::filesystem::exists(path, ec)) return {};
  auto text = read_file(path, kMaxConfigBytes);
  if (!text) return text.error();
  static const RunCommandLine schema;  // what the file may hold
  auto entries = parse_config_yaml(*text, path, [](const std::string& flag) {
    return flag != "config" && flag != "help" &&
           schema.app.get_option_no_throw("--" + flag) != nullptr;
  });
  if (!entries) return entries.error();
  for (const ConfigEntry& e : *entries) {
    const std::string at = path + (e.line > 0 ? ":" + std::to_string(e.line) : "");
    CLI::Option* opt = cmd.get_option_no_throw("--" + e.flag);
    if (opt == nullptr || opt->count() > 0) continue;  // not this verb's, or given as a flag
    try {
      if (opt->get_expected_min() == 0) {  // a flag: true/false
        if (e.values.size() != 1) return make_error(at + ": " + e.flag + " takes true or false");
        opt->add_result(opt->get_flag_value(e.flag, e.values.front()));
      } else {
        if (e.values.size() > 1 && opt->get_expected_max() <= 1) {
          // A list for a single-valued flag: its comma form (--components cpu,disk).
          std::string joined;
          for (const std::string& v : e.values) joined += (joined.empty() ? "" : ",") + v;
          opt->add_result(joined);
        } else {
          opt->add_result(e.values);
        }
      }
      opt->run_callback();
    } catch (const CLI::Error& err) {
      return make_error(at + ": " + e.flag + ": " + err.what());
    }
  }
  return {};
}

Result<std::string> render_config_yaml(const std::vector<std::string>& flags) {
  RunCommandLine probe;
  if (auto r = probe.parse(flags); !r) return r.error();
  YAML::Emitter out;
  out << YAML::BeginMap;
  int written = 0;
  for (const CLI::Option* opt : probe.app.get_options()) {
    if (opt->count() == 0 || opt->get_lnames().empty()) continue;
    const std::string name = opt->get_lnames().front();
    if (name == "help") continue;
    out << YAML::Key << name << YAML::Value;
    const auto& results = opt->results();
    if (opt->get_expected_min() == 0) {
      out << opt->as<bool>();
    } else if (results.size() == 1) {
      const std::string& v = results.front();
      // JSON-valued flags become structured YAML (JSON is YAML: its flow form reads back the same).
      if (!v.empty() && (v.front() == '{' || v.front() == '[') && nlohmann::json::accept(v))
        out << YAML::Load(v);
      else
        emit_text(out, v);
    } else {
      out << YAML::BeginSeq;
      for (const std::string& v : results) emit_text(out, v);
      out << YAML::EndSeq;
    }
    ++written;
  }
  out << YAML::EndMap;
  if (!out.good())
    return make_error(std::string("cannot write the configuration: ") + out.GetLastError());
  std::string text = kDefaultConfigTemplate;
  if (written > 0)
    text += "\n# Set by `gpud up` from its flags:\n" + std::string(out.c_str()) + "\n";
  return text;
}

}  // namespace gpud::app
