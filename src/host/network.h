// Network: the host's interfaces with private IPv4 addresses (RFC 1918 and CGNAT 100.64/10), for
// /machine-info's nicInfo.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "host/host_fs.h"

namespace gpud::host {

struct NetworkInterface {
  std::string name;  // "eth0"
  std::string mac;   // "0c:42:a1:00:11:22" from /sys/class/net/<if>/address
  std::string ip;    // "10.0.1.5"
  bool operator==(const NetworkInterface&) const = default;
};

// One IPv4 address of an interface, as getifaddrs reports it.
struct InterfaceAddress {
  std::string name;
  std::string ipv4;
  bool loopback = false;
};

// 10/8, 172.16/12, 192.168/16 and 100.64/10; false for anything that is not dotted IPv4.
bool is_private_ipv4(std::string_view dotted);
// Keeps private, non-loopback addresses and adds each interface's MAC through HostFs.
std::vector<NetworkInterface> select_private_interfaces(const std::vector<InterfaceAddress>& addrs,
                                                        const HostFs& fs);
// Every address of this network namespace's interfaces but loopback and IPv6 link-local, IPv4 and
// IPv6, each once ("10.0.1.5", "2001:db8::5"): the names a node's certificate should cover.
std::vector<std::string> interface_addresses();
// getifaddrs() of this network namespace, filtered by select_private_interfaces.
std::vector<NetworkInterface> read_private_ip_interfaces(const HostFs& fs);

}  // namespace gpud::host
