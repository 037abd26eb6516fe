// systemd units as `systemctl show -p ... UNIT...` reports them, and whether systemd runs the host:
// the unit states the systemd and tailscale components read, with no library dependency.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "host/host_fs.h"

namespace gpud::host {

// The properties asked for, in `systemctl show -p` form.
inline constexpr std::string_view kUnitProperties =
    "Id,LoadState,ActiveState,SubState,NRestarts,StateChangeTimestamp";

struct UnitState {
  std::string id;                      // Id=, e.g. "containerd.service"
  std::string load_state;              // "loaded", "not-found", "masked", ...
  std::string active_state;            // "active", "inactive", "failed", "activating", ...
  std::string sub_state;               // "running", "dead", "auto-restart", ...
  std::optional<uint64_t> n_restarts;  // services only: automatic restarts since the last start
  std::string state_changed;  // StateChangeTimestamp as systemctl prints it; "" never changed
  std::string error;          // what was garbled or missing in its block; "" when read
};

// "docker" -> "docker.service"; a name with a unit suffix (".service", ".socket", ...) is kept.
std::string unit_name(std::string_view name);

// Parses the output of `systemctl show -p <kUnitProperties> U1 U2 ...`: one block of Key=Value
// lines per unit, blocks separated by an empty line, in the order of `units` (unit_name form).
// A unit whose block is missing, has another Id or a garbled NRestarts gets an error; a unit
// systemd does not know has load_state "not-found".
std::vector<UnitState> parse_systemctl_show(std::string_view text,
                                            const std::vector<std::string>& units);

// Runs `<systemctl> show -p <kUnitProperties> --no-pager U1 U2 ...` with a deadline. A command that
// cannot run, times out or exits non-zero is an error (with what it wrote to stderr).
Result<std::vector<UnitState>> systemctl_show(const std::string& systemctl,
                                              std::string_view search_path,
                                              const std::vector<std::string>& units,
                                              std::chrono::milliseconds timeout);

// systemd runs the host (is PID 1): /run/systemd/system exists under the host root, the test
// sd_booted(3) makes.
bool systemd_running(const HostFs& fs);

}  // namespace gpud::host
