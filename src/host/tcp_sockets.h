// TCP socket tables (/proc/net/tcp and /proc/net/tcp6): which user owns one end of a connection,
// so the API can tell who a loopback client runs as.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string_view>

#include "core/result.h"
#include "host/host_fs.h"

namespace gpud::host {

// One end of a TCP connection. IPv4 addresses are kept IPv4-mapped (::ffff:a.b.c.d), so an end seen
// through a dual-stack IPv6 socket compares equal to the same end in the IPv4 table.
struct TcpEndpoint {
  std::array<uint8_t, 16> address{};
  uint16_t port = 0;
  bool operator==(const TcpEndpoint&) const = default;
};

// "127.0.0.1", "::1", "::ffff:127.0.0.1" or "[::1]" and a port; nullopt for anything else.
std::optional<TcpEndpoint> make_tcp_endpoint(std::string_view ip, int port);

// The uid column of the row in `table` (the text of /proc/net/tcp or /proc/net/tcp6) whose local
// end is `local` and remote end `remote`. Rows without an inode are skipped: the kernel lists
// TIME_WAIT and orphaned sockets as uid 0 with inode 0, and a client that closes its socket right
// after sending must not pass for root.
std::optional<uint32_t> find_socket_uid(std::string_view table, const TcpEndpoint& local,
                                        const TcpEndpoint& remote);

// find_socket_uid over <root>/proc/net/tcp and tcp6 (either may be missing, e.g. without IPv6).
// The tables are those of the reading process's network namespace, which is the one a loopback
// connection to it lives in. nullopt: no live socket with these ends (yet: a server lists the
// socket once it accepted the connection). Error: neither table readable.
[[nodiscard]] Result<std::optional<uint32_t>> find_tcp_socket_owner(const HostFs& fs,
                                                                    const TcpEndpoint& local,
                                                                    const TcpEndpoint& remote);
// find_tcp_socket_owner, with no such socket an error too.
[[nodiscard]] Result<uint32_t> tcp_socket_owner(const HostFs& fs, const TcpEndpoint& local,
                                                const TcpEndpoint& remote);

}  // namespace gpud::host
