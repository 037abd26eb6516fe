// systemd's readiness protocol (sd_notify(3)): a datagram to $NOTIFY_SOCKET, so a Type=notify unit
// knows when the API listens and when the daemon is shutting down.
#pragma once

#include <string>

#include "core/result.h"

namespace gpud::app {

// Sends `state` (e.g. "READY=1", "STOPPING=1", newline-separated assignments) to the socket named
// by $NOTIFY_SOCKET: a filesystem path, or an abstract socket when it starts with '@'. Returns
// false when NOTIFY_SOCKET is unset (not started by systemd), an error when sending failed.
[[nodiscard]] Result<bool> sd_notify(const std::string& state);

}  // namespace gpud::app
