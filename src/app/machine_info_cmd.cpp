// `gpud machine-info`: prints what /machine-info would serve, read directly from this host.
#include <cstdlib>
#include <iostream>
#include <memory>

#include "app/options.h"
#include "app/verbs.h"
#include "host/machine_info.h"
#include "host/nvidia_driver_root.h"
#include "nvml/source.h"

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
  auto nvml_lib = std::make_shared<std::string>();
  cmd->add_option("--nvml-lib", *nvml_lib,
                  "libnvidia-ml.so.1 to load for the GPUs (default: $GPUD_NVML_LIBRARY_PATH, else "
                  "the system's)");
  // GPUd's flags.
  auto format = std::make_shared<std::string>("plain");
  cmd->add_option("--output-format", *format, "plain or json (json is --json)")
      ->capture_default_str()
      ->check(CLI::IsMember({"plain", "json"}));
  cmd->add_option_function<std::string>(
      "--data-dir", [](const std::string&) {}, "GPUd's flag; machine-info reads no state");
  // Quiet by default: stdout is the document, and why NVML gave no GPUs is in it (plain) or shown
  // by gpuInfo's absence (json).
  auto log_level = std::make_shared<std::string>("error");
  cmd->add_option("--log-level,-l", *log_level, "debug, info, warn or error")
      ->capture_default_str();
  cmd->callback([root, json, format, log_level, nvml_lib, exit_code] {
    if (auto r = setup_logging(*log_level, ""); !r) {
      std::cerr << "✘ " << r.error().message << "\n";
      *exit_code = kExitUsage;
      return;
    }
    host::HostFs fs(*root);
    nlohmann::json info = host::collect_machine_info(fs);
    // The GPUs as the daemon serves them, from NVML (within its call deadline on a hung driver).
    const char* driver_root = std::getenv("GPUD_NVIDIA_DRIVER_ROOT");
    nvml::NvidiaSource nvidia(nvml_library_from_environment(*nvml_lib), nvml::kDefaultCallDeadline,
                              std::chrono::seconds(5),
                              host::nvidia_driver_roots(fs, driver_root ? driver_root : ""));
    nvidia.open();
    nvidia.fill_machine_info(info);
    if (*json || *format == "json") {
      std::cout << info.dump(2) << "\n";  // gpuInfo.gpus empty when NVML gave none
    } else {
      print_fields(info, "");
      const auto gpus = info.value("/gpuInfo/gpus"_json_pointer, nlohmann::json::array());
      if (gpus.empty()) {
        std::string why = nvidia.message();
        if (nvidia.status() == nvml::NvmlStatus::kReady)
          if (auto snap = nvidia.snapshot(); !snap) why = snap.error().message;
        std::cout << "gpuInfo: none listed (" << why << ")\n";
      }
    }
    *exit_code = kExitOk;
  });
}

}  // namespace gpud::app
