#include "host/network.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>

#include <algorithm>
#include <cstdint>
#include <memory>

namespace gpud::host {

bool is_private_ipv4(std::string_view dotted) {
  std::string s(dotted);
  in_addr a{};
  if (::inet_pton(AF_INET, s.c_str(), &a) != 1) return false;
  uint32_t ip = ntohl(a.s_addr);
  auto in = [ip](uint32_t net, int prefix) {
    uint32_t mask = prefix == 0 ? 0 : ~uint32_t{0} << (32 - prefix);
    return (ip & mask) == net;
  };
  return in(0x0A000000, 8) || in(0xAC100000, 12) || in(0xC0A80000, 16) || in(0x64400000, 10);
}

std::vector<NetworkInterface> select_private_interfaces(const std::vector<InterfaceAddress>& addrs,
                                                        const HostFs& fs) {
  std::vector<NetworkInterface> out;
  for (const InterfaceAddress& a : addrs) {
    if (a.loopback || a.name == "lo" || !is_private_ipv4(a.ipv4)) continue;
    NetworkInterface nic{a.name, "", a.ipv4};
    if (auto mac = fs.read_line("/sys/class/net/" + a.name + "/address"); mac) nic.mac = *mac;
    out.push_back(std::move(nic));
  }
  return out;
}

std::vector<NetworkInterface> read_private_ip_interfaces(const HostFs& fs) {
  ifaddrs* raw = nullptr;
  if (::getifaddrs(&raw) != 0) return {};
  std::unique_ptr<ifaddrs, decltype(&::freeifaddrs)> list(raw, &::freeifaddrs);
  std::vector<InterfaceAddress> addrs;
  for (ifaddrs* it = list.get(); it != nullptr; it = it->ifa_next) {
    if (it->ifa_addr == nullptr || it->ifa_addr->sa_family != AF_INET || it->ifa_name == nullptr)
      continue;
    char buf[INET_ADDRSTRLEN] = {};
    const auto* sin = reinterpret_cast<const sockaddr_in*>(it->ifa_addr);
    if (::inet_ntop(AF_INET, &sin->sin_addr, buf, sizeof buf) == nullptr) continue;
    addrs.push_back({it->ifa_name, buf, (it->ifa_flags & IFF_LOOPBACK) != 0});
  }
  return select_private_interfaces(addrs, fs);
}

std::vector<std::string> interface_addresses() {
  ifaddrs* raw = nullptr;
  if (::getifaddrs(&raw) != 0) return {};
  std::unique_ptr<ifaddrs, decltype(&::freeifaddrs)> list(raw, &::freeifaddrs);
  std::vector<std::string> out;
  for (ifaddrs* it = list.get(); it != nullptr; it = it->ifa_next) {
    if (it->ifa_addr == nullptr || (it->ifa_flags & IFF_LOOPBACK) != 0) continue;
    char buf[INET6_ADDRSTRLEN] = {};
    if (it->ifa_addr->sa_family == AF_INET) {
      const auto* sin = reinterpret_cast<const sockaddr_in*>(it->ifa_addr);
      if (::inet_ntop(AF_INET, &sin->sin_addr, buf, sizeof buf) == nullptr) continue;
    } else if (it->ifa_addr->sa_family == AF_INET6) {
      const auto* sin6 = reinterpret_cast<const sockaddr_in6*>(it->ifa_addr);
      // A link-local address names no host off its link (and needs a zone to be used at all).
      if (IN6_IS_ADDR_LINKLOCAL(&sin6->sin6_addr)) continue;
      if (::inet_ntop(AF_INET6, &sin6->sin6_addr, buf, sizeof buf) == nullptr) continue;
    } else {
      continue;
    }
    if (std::find(out.begin(), out.end(), buf) == out.end()) out.emplace_back(buf);
  }
  return out;
}

}  // namespace gpud::host
