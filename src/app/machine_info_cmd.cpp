// `gpud machine-info`: prints what /machine-info would serve, read directly from this host.
#include <iostream>
#include <memory>

#include "app/options.h"
#include "app/verbs.h"
#include "host/machine_info.h"

namespace gpud::app {
namespace {

void print_fields(const nlohmann::json& j, const std::string& prefix) {
  for (auto& [k, v] : j.items()) {
    std::string key = prefix.empty() ? k : prefix + "." + k;
    if (v.is_object()) {
      print_fields(v, key);
    } else if (v.is_array()) {
      if (v.empty()) continue;
      for (size_t i = 0; i < v.size(); ++i) {
        if (v[i].is_object())
          print_fields(v[i], key + "[" + std::to_string(i) + "]");
        else
          std::cout << key << "[" << i << "]: " << v[i].dump() << "\n";
      }
    } else {
      std::string text = v.is_string() ? v.get<std::string>() : v.dump();
      if (!text.empty()) std::cout << key << ": " << text << "\n";
    }
  }
}

}  // namespace

void add_machine_info(CLI::App& app, int* exit_code) {
  auto root = std::make_shared<std::string>("/");
  auto json = std::make_shared<bool>(false);
  auto* cmd = app.add_subcommand("machine-info", "Print this machine's information");
  cmd->add_option("--host-root", *root, "Prefix for /proc, /sys and /etc reads")
      ->capture_default_str();
  cmd->add_flag("--json", *json, "Print JSON (the /machine-info document)");
  // GPUd's flags.
  auto format = std::make_shared<std::string>("plain");
  cmd->add_option("--output-format", *format, "plain or json (json is --json)")
      ->capture_default_str()
      ->check(CLI::IsMember({"plain", "json"}));
  cmd->add_option_function<std::string>(
      "--data-dir", [](const std::string&) {}, "GPUd's flag; machine-info reads no state");
  auto log_level = std::make_shared<std::string>("info");
  cmd->add_option("--log-level,-l", *log_level, "debug, info, warn or error")
      ->capture_default_str();
  cmd->callback([root, json, format, log_level, exit_code] {
    if (auto r = setup_logging(*log_level, ""); !r) {
      std::cerr << "✘ " << r.error().message << "\n";
      *exit_code = kExitUsage;
      return;
    }
    host::HostFs fs(*root);
    nlohmann::json info = host::collect_machine_info(fs);
    if (*json || *format == "json")
      std::cout << info.dump(2) << "\n";
    else
      print_fields(info, "");
    *exit_code = kExitOk;
  });
}

}  // namespace gpud::app
