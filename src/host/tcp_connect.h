// TCP connect latency to host:port targets: the time a three-way handshake takes, the one network
// round trip gpud can measure to any service without a protocol of its own.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace gpud::host {

struct TcpTarget {
  std::string host;  // a name, an IPv4 address or an IPv6 address (without brackets)
  uint16_t port = 0;
  std::string text;  // as given: "host:port" or "[v6]:port"
};

// "host:port", "10.0.0.1:443" or "[::1]:8080"; the port 1-65535.
[[nodiscard]] Result<TcpTarget> parse_tcp_target(std::string_view text);

struct TcpConnectResult {
  std::string target;                                // TcpTarget::text
  std::optional<std::chrono::microseconds> latency;  // set when the connection was established
  std::string error;  // why not: name resolution, refused, timed out, ...
};

// Connects to every target at once (non-blocking, one poll loop) and closes each connection as
// soon as it is established; a target still connecting at `timeout` is "timed out". Names are
// resolved first (getaddrinfo; the first address is used), which is not covered by the timeout.
std::vector<TcpConnectResult> measure_tcp_connect(const std::vector<TcpTarget>& targets,
                                                  std::chrono::milliseconds timeout);

}  // namespace gpud::host
