// Options shared by the CLI verbs and the helpers that turn them into a Config.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <string_view>

#include "app/gpud_flags.h"
#include "app/kubeconfig.h"
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
  std::string nfs_checker_configs;  // JSON, parsed into config.nfs_checkers
  std::string kernel_modules;
  std::string files;
  std::string systemd_units;
  std::string network_latency_targets;
  std::string network_latency_threshold = "7s";
  std::string infiniband_exclude_devices;  // comma list
  // kernel log
  int xid_reboot_threshold = kDefaultRebootThreshold;
  std::string xid_thresholds;   // JSON {"overrides":{"94":{"rebootThreshold":1000}}}
  std::string sxid_thresholds;  // same shape, for SXid codes
  std::string xid_lookback;  // Go duration; "": the events retention
  std::string sxid_lookback;
  // API
  std::string admin_token_file;
  bool api_socket_given = false;    // --api-socket was given (even as ""): no default
  KubernetesSettings kubernetes;    // `gpud run` only
  GpudFlagsGiven gpud_flags_given;  // GPUd's flags given that gpud accepts without using
};

// The daemon's Unix socket under a data dir, where `run` listens and the CLI looks by default.
std::string default_api_socket(const std::string& data_dir);

// The admin token is read from this environment variable (systemd sets it from /etc/default/gpud)
// or from a file, never from argv.
inline constexpr const char* kAdminTokenEnv = "GPUD_ADMIN_TOKEN";
// What `--admin-token` on the command line answers.
inline constexpr const char* kAdminTokenArgvRefusal =
    "the admin token is not accepted on the command line, where every user can read it "
    "(/proc/<pid>/cmdline); put it in a file only root can read and pass --admin-token-file FILE, "
    "or set GPUD_ADMIN_TOKEN in the environment (/etc/default/gpud for the service)";
// A usable token: at least 16 characters, printable ASCII without spaces or quotes (it travels in
// an HTTP header and in /etc/default/gpud).
[[nodiscard]] Result<void> check_admin_token(std::string_view token);
// The token in `path` (surrounding whitespace dropped); refused when the file is readable or
// writable by other users.
[[nodiscard]] Result<std::string> read_admin_token_file(const std::string& path);
// The token from --admin-token-file or from $GPUD_ADMIN_TOKEN's value (nullptr: unset); both at
// once is an error. "" when neither is given.
[[nodiscard]] Result<std::string> resolve_admin_token(const std::string& token_file,
                                                      const char* env_value);

// /var/lib/gpud as root (when /var/lib exists), ~/.gpud otherwise.
std::string default_data_dir();
// $GPUD_KMSG_PATH when set (tests point the daemon at a private file), else /dev/kmsg.
std::string kmsg_path_from_environment();
// --nvml-lib when given, else $GPUD_NVML_LIBRARY_PATH, else "" (the system's libnvidia-ml.so.1).
std::string nvml_library_from_environment(const std::string& flag);
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
// `gpud run`'s options on an App of their own: what `gpud up` checks and renders into the
// configuration file, and the keys that file may hold.
struct RunCommandLine {
  CLI::App app{"gpud run", "run"};
  RunFlags flags;
  std::string sample = "1m";
  RunCommandLine();
  RunCommandLine(const RunCommandLine&) = delete;
  RunCommandLine& operator=(const RunCommandLine&) = delete;
  // Parses `args` as `gpud run` would ("not a valid `gpud run` flag list: ..." otherwise).
  [[nodiscard]] Result<void> parse(const std::vector<std::string>& args);
};
// finalize() plus the run-only checks; fills flags.config.
Result<void> validate_run_flags(RunFlags& flags, const std::string& sample);
LogOptions log_options(const Config& config);

}  // namespace gpud::app
