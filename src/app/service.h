// `gpud up` / `gpud down`: install gpud as a systemd service (binary, /etc/gpud/gpud.yaml,
// /etc/default/gpud, unit) and remove it again; the service state `gpud status` reports.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace gpud::app {

inline constexpr const char* kServiceName = "gpud.service";
inline constexpr const char* kInstalledBinary = "/usr/local/bin/gpud";
inline constexpr const char* kUnitPath = "/etc/systemd/system/gpud.service";
inline constexpr const char* kEnvFilePath = "/etc/default/gpud";
inline constexpr const char* kConfigPath = "/etc/gpud/gpud.yaml";

// The shipped unit (deploy/systemd/gpud.service) with ExecStart running `binary`.
std::string render_unit(std::string_view binary);
// The shipped /etc/default/gpud (deploy/systemd/gpud.default, FLAGS="") with, when `admin_token`
// is set, GPUD_ADMIN_TOKEN="<token>": systemd hands it to the daemon in its environment, so the
// token never appears in ExecStart's argv.
Result<std::string> render_env_file(const std::string& admin_token = "");
// The GPUD_ADMIN_TOKEN value of an environment file's text ("" when it has none).
std::string admin_token_in_env_file(const std::string& text);
// Validates `flags` as `gpud run` would parse them (same options, same checks).
Result<void> validate_daemon_flags(const std::vector<std::string>& flags);

// `gpud down --reset-state`: removes the state database (gpud.state, -wal, -shm) from
// `data_dir`, refusing while a daemon holds the data dir's lock; the paths removed (none when
// there was no database or no such directory).
Result<std::vector<std::string>> reset_state(const std::string& data_dir);

// True when systemd is PID 1 (what sd_booted(3) checks: /run/systemd/system exists).
bool systemd_running(const std::string& root = "/");

// What `gpud status` says about the service.
struct ServiceState {
  std::string summary;  // "active (enabled)", "not installed", "systemd not running", ...
  std::string active;   // `systemctl is-active`; empty when not asked
  std::string enabled;  // `systemctl is-enabled`; empty when not asked
  std::string unit;     // the unit file found; empty when none
};
ServiceState service_state();
// The summary line from its parts (pure, for tests).
std::string describe_service(bool systemd, const std::string& unit, const std::string& active,
                             const std::string& enabled);

// Writes the service files under `root` ("" or "/": the real system): the binary `self_exe` as
// usr/local/bin/gpud, etc/gpud/gpud.yaml with `flags` (only when flags are given or the file is
// missing), etc/default/gpud with FLAGS="" (only when `flags` or `admin_token` is given or the
// file is missing; a token already in the file is kept unless `admin_token` replaces it), and
// etc/systemd/system/gpud.service. Returns whether any file changed; `log` gets one line per file.
Result<bool> install_service_files(const std::string& root, const std::string& self_exe,
                                   const std::vector<std::string>& flags,
                                   const std::string& admin_token, std::vector<std::string>* log);
// Removes etc/systemd/system/gpud.service and etc/default/gpud under `root`; the binary, the
// configuration file and the data dir stay. `log` gets one line per file.
Result<void> remove_service_files(const std::string& root, std::vector<std::string>* log);

}  // namespace gpud::app
