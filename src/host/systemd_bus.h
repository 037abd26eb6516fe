// systemd unit states asked over D-Bus with sd-bus: how gpud in a container, with the host's /run
// under --host-root, reads the host's systemd without a systemctl of its own (the image has none,
// and a container's systemctl would ask the container).
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "host/host_fs.h"
#include "host/systemctl.h"

namespace gpud::host {

// The sockets through which the host's systemd answers, in the order tried: systemd's own
// (peer-to-peer, root only, works without dbus-daemon), then the D-Bus system bus.
inline constexpr std::string_view kSystemdPrivateSocket = "/run/systemd/private";
inline constexpr std::string_view kSystemBusSocket = "/run/dbus/system_bus_socket";

// What asking systemd gave: the unit states (in the order asked), or an error. `reached` false
// with an error means systemd could not be asked at all (no socket, connection refused or
// dropped): the units were not checked, which says nothing about them.
struct SystemdAnswer {
  Result<std::vector<UnitState>> units = make_error("not asked");
  bool reached = false;
  std::string via;  // how it was asked: "systemctl", or the socket's path
};

// "unix:path=<path>" with the path escaped as the D-Bus address syntax wants.
std::string unix_bus_address(std::string_view socket_path);

// Asks systemd at `socket_path` for the units' Id, LoadState, ActiveState, SubState,
// StateChangeTimestamp and (services) NRestarts, all within `timeout`. `bus_client`: the socket is
// a message bus (sends Hello, addresses org.freedesktop.systemd1); else systemd itself. A unit
// whose properties cannot be read gets an error of its own; a unit systemd does not know has
// load_state "not-found".
SystemdAnswer systemd_bus_show(const std::string& socket_path, bool bus_client,
                               const std::vector<std::string>& units,
                               std::chrono::milliseconds timeout);

// Asks the systemd of the host under `fs`'s root through kSystemdPrivateSocket, then
// kSystemBusSocket: the first that answers is used. Neither answering is not reached, with each
// one's reason.
SystemdAnswer host_systemd_show(const HostFs& fs, const std::vector<std::string>& units,
                                std::chrono::milliseconds timeout);

// How gpud reads the host's units, for every component that does. Under a host root other than /
// (gpud in a container): the host's systemd through the sockets there (host_systemd_show), else
// `systemctl` found on `search_path` (also how the tests feed recorded output). On the host itself
// the other way round: systemctl first (no library loaded), then the sockets. A systemctl that
// cannot reach systemd ("Failed to connect to bus", "has not been booted with systemd"), a missing
// one and no socket answering are not reached, with each way's reason.
SystemdAnswer ask_systemd(const HostFs& fs, const std::string& systemctl,
                          std::string_view search_path, const std::vector<std::string>& units,
                          std::chrono::milliseconds timeout);

// One unit's state for a component that also checks a service (containerd, docker, tailscale):
// nullopt where systemd does not run the host or could not be asked (the service is not judged
// then), else the state or the error of reading it.
std::optional<Result<UnitState>> host_unit_state(const HostFs& fs, const std::string& systemctl,
                                                 std::string_view search_path,
                                                 const std::string& unit,
                                                 std::chrono::milliseconds timeout);

}  // namespace gpud::host
