#include "host/network.h"

#include <gtest/gtest.h>

namespace gpud::host {
namespace {

std::string fixture(std::string_view sub) {
  return std::string(GPUD_SOURCE_DIR) + "/testing/fixtures/host-os/" + std::string(sub);
}

TEST(PrivateIpv4, Rfc1918AndCgnatRanges) {
  for (const char* ip : {"10.0.0.1", "10.255.255.255", "172.16.0.1", "172.31.255.254",
                         "192.168.1.1", "100.64.0.1", "100.127.255.254"})
    EXPECT_TRUE(is_private_ipv4(ip)) << ip;
}

TEST(PrivateIpv4, PublicLoopbackAndGarbageAreNot) {
  for (const char* ip : {"8.8.8.8", "172.32.0.1", "172.15.255.255", "192.169.0.1", "100.128.0.1",
                         "100.63.255.255", "127.0.0.1", "", "10.0.0", "fe80::1", "10.0.0.256"})
    EXPECT_FALSE(is_private_ipv4(ip)) << ip;
}

TEST(PrivateInterfaces, KeepsPrivateNonLoopbackWithMac) {
  std::vector<InterfaceAddress> addrs = {
      {"lo", "127.0.0.1", true},
      {"eth0", "10.1.2.3", false},
      {"eth1", "34.1.2.3", false},
      {"tailscale0", "100.100.1.2", false},
  };
  auto nics = select_private_interfaces(addrs, HostFs(fixture("net")));
  ASSERT_EQ(nics.size(), 2u);
  EXPECT_EQ(nics[0], (NetworkInterface{"eth0", "0c:42:a1:00:11:22", "10.1.2.3"}));
  EXPECT_EQ(nics[1], (NetworkInterface{"tailscale0", "", "100.100.1.2"}));  // no sysfs address
}

TEST(PrivateInterfaces, SmokeOnThisMachineHasShape) {
  for (const auto& n : read_private_ip_interfaces(HostFs("/"))) {
    EXPECT_FALSE(n.name.empty());
    EXPECT_NE(n.name, "lo");
    EXPECT_TRUE(is_private_ipv4(n.ip));
  }
}

}  // namespace
}  // namespace gpud::host
