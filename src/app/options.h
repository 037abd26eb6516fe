// Options shared by the CLI verbs and the helpers that turn them into a Config.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "core/config.h"
#include "core/result.h"

namespace gpud::app {

// Raw flag values as typed; finalize() validates them into the Config.
struct RunFlags {
  Config config;
  std::string events_retention = "336h";
  std::string metrics_retention = "3h";
  std::string components;  // comma list
  std::string mount_points;
  std::string kernel_modules;
  std::string files;
  // kernel log
  std::string xid_lookback;  // Go duration; "": the events retention
  std::string sxid_lookback;
};

// /var/lib/gpud as root (when /var/lib exists), ~/.gpud otherwise.
std::string default_data_dir();
// Adds the flags every verb that reads host state shares (--host-root, --components, ...).
void add_component_flags(CLI::App& cmd, RunFlags& flags);
void add_store_flags(CLI::App& cmd, RunFlags& flags);
// Validates durations, component names and paths; fills flags.config.
Result<void> finalize(RunFlags& flags);
std::vector<std::string> split_list(const std::string& s);
// Sets up spdlog: level name (debug|info|warn|error), optional log file (rotating), stderr
// otherwise.
Result<void> setup_logging(const std::string& level, const std::string& file);

}  // namespace gpud::app
