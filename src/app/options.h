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
// Logging: stderr (journald captures it under systemd), or a file with size-based rotation.
inline constexpr const char* kDefaultLoggerName = "gpud";
struct LogOptions {
  std::string level = "info";                // debug|info|warn|error|off
  std::string file;                          // empty: stderr
  size_t max_size_bytes = size_t{64} << 20;  // rotate when the file would grow past this
  size_t max_files = 5;                      // rotated files kept besides the current one
};
// Sets up spdlog's default logger ("gpud") and the pattern every named logger (core/log.h) shares:
// `<time> <level> [<component>] <message>`.
Result<void> setup_logging(const LogOptions& opts);
Result<void> setup_logging(const std::string& level, const std::string& file);

// `gpud run`'s flags (run.cpp), shared with `gpud up`, which validates the flags it keeps for the
// service exactly as `run` will parse them. `sample` receives the hidden --metrics-sample-interval.
void add_run_options(CLI::App& cmd, RunFlags& flags, std::string& sample);
// finalize() plus the run-only checks; fills flags.config.
Result<void> validate_run_flags(RunFlags& flags, const std::string& sample);
LogOptions log_options(const Config& config);

}  // namespace gpud::app
