#include "host/tcp_sockets.h"

#include <arpa/inet.h>

#include <charconv>
#include <cstring>
#include <string>

namespace gpud::host {
namespace {

constexpr std::array<uint8_t, 12> kMappedPrefix = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

std::optional<uint32_t> parse_hex32(std::string_view s) {
  if (s.size() != 8) return std::nullopt;
  uint32_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v, 16);
  if (ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return v;
}

// "0100007F:1F90" (IPv4) or 32 hex digits and a port (IPv6). The kernel prints each 32-bit word
// of the address as the native integer its network-order bytes form, so copying the parsed word
// back into memory restores the bytes on any endianness.
std::optional<TcpEndpoint> parse_table_endpoint(std::string_view field) {
  auto colon = field.find(':');
  if (colon == std::string_view::npos) return std::nullopt;
  std::string_view addr = field.substr(0, colon);
  std::string_view port = field.substr(colon + 1);
  TcpEndpoint e;
  unsigned p = 0;
  auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), p, 16);
  if (ec != std::errc() || end != port.data() + port.size() || port.empty() || p > 0xffff)
    return std::nullopt;
  e.port = static_cast<uint16_t>(p);
  if (addr.size() == 8) {
    auto w = parse_hex32(addr);
    if (!w) return std::nullopt;
    std::copy(kMappedPrefix.begin(), kMappedPrefix.end(), e.address.begin());
    std::memcpy(e.address.data() + 12, &*w, 4);
    return e;
  }
  if (addr.size() != 32) return std::nullopt;
  for (size_t i = 0; i < 4; ++i) {
    auto w = parse_hex32(addr.substr(i * 8, 8));
    if (!w) return std::nullopt;
    std::memcpy(e.address.data() + i * 4, &*w, 4);
  }
  return e;
}

std::optional<uint64_t> parse_dec(std::string_view s) {
  uint64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || s.empty()) return std::nullopt;
  return v;
}

}  // namespace

std::optional<TcpEndpoint> make_tcp_endpoint(std::string_view ip, int port) {
  if (port < 0 || port > 0xffff) return std::nullopt;
  std::string addr(trim(ip));
  if (addr.size() > 2 && addr.front() == '[' && addr.back() == ']')
    addr = addr.substr(1, addr.size() - 2);
  TcpEndpoint e;
  e.port = static_cast<uint16_t>(port);
  in_addr v4{};
  if (inet_pton(AF_INET, addr.c_str(), &v4) == 1) {
    std::copy(kMappedPrefix.begin(), kMappedPrefix.end(), e.address.begin());
    std::memcpy(e.address.data() + 12, &v4.s_addr, 4);
    return e;
  }
  in6_addr v6{};
  if (inet_pton(AF_INET6, addr.c_str(), &v6) != 1) return std::nullopt;
  std::memcpy(e.address.data(), v6.s6_addr, 16);
  return e;
}

std::optional<uint32_t> find_socket_uid(std::string_view table, const TcpEndpoint& local,
                                        const TcpEndpoint& remote) {
  for (std::string_view line : split_lines(table)) {
    // sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode
    auto f = split_fields(line);
    if (f.size() < 10 || f[0].empty() || f[0].back() != ':') continue;  // the header, or garbage
    auto l = parse_table_endpoint(f[1]);
    auto r = parse_table_endpoint(f[2]);
    if (!l || !r || *l != local || *r != remote) continue;
    auto uid = parse_dec(f[7]);
    auto inode = parse_dec(f[9]);
    if (!uid || !inode || *inode == 0 || *uid > UINT32_MAX) continue;
    return static_cast<uint32_t>(*uid);
  }
  return std::nullopt;
}

Result<std::optional<uint32_t>> find_tcp_socket_owner(const HostFs& fs, const TcpEndpoint& local,
                                                      const TcpEndpoint& remote) {
  std::string errors;
  bool read_any = false;
  for (const char* table : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    auto text = fs.read(table);
    if (!text) {
      errors += (errors.empty() ? "" : "; ") + text.error().message;
      continue;
    }
    read_any = true;
    if (auto uid = find_socket_uid(*text, local, remote)) return std::optional<uint32_t>(*uid);
  }
  if (!read_any) return make_error("cannot read the TCP socket tables: " + errors);
  return std::optional<uint32_t>();
}

Result<uint32_t> tcp_socket_owner(const HostFs& fs, const TcpEndpoint& local,
                                  const TcpEndpoint& remote) {
  auto owner = find_tcp_socket_owner(fs, local, remote);
  if (!owner) return owner.error();
  if (!*owner)
    return make_error("the peer's socket is not in " + fs.path("/proc/net/tcp") +
                      " or tcp6 (closed, or in another network namespace)");
  return **owner;
}

}  // namespace gpud::host
