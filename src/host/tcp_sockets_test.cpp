#include "host/tcp_sockets.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace gpud::host {
namespace {

// A server on 127.0.0.1:15132 (0x3B1C) with one client from port 54321 (0xD431) owned by uid
// 65534, and a closed client from 54322 (0xD432) in TIME_WAIT, which the kernel lists as uid 0.
// Addresses as an x86 kernel prints them.
constexpr const char* kTcp =
    "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout "
    "inode\n"
    "   0: 0100007F:3B1C 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 "
    "31337 1 0000000000000000 100 0 0 10 0\n"
    "   1: 0100007F:3B1C 0100007F:D431 01 00000000:00000000 00:00000000 00000000     0        0 "
    "40001 1 0000000000000000 20 4 30 10 -1\n"
    "   2: 0100007F:D431 0100007F:3B1C 01 00000000:00000000 00:00000000 00000000 65534        0 "
    "40002 1 0000000000000000 20 4 30 10 -1\n"
    "   3: 0100007F:D432 0100007F:3B1C 06 00000000:00000000 03:00001770 00000000     0        0 "
    "0 3 0000000000000000\n";

// The same through IPv6 sockets: a client on ::1 (uid 1000), and an IPv6 client socket connected
// to the IPv4-mapped address of an IPv4 server (uid 1001).
constexpr const char* kTcp6 =
    "  sl  local_address                         remote_address                        st "
    "tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
    "   0: 00000000000000000000000001000000:D433 00000000000000000000000001000000:3B1C 01 "
    "00000000:00000000 00:00000000 00000000  1000        0 50001 1 0000000000000000 20 4 30 10 "
    "-1\n"
    "   1: 0000000000000000FFFF00000100007F:D434 0000000000000000FFFF00000100007F:3B1C 01 "
    "00000000:00000000 00:00000000 00000000  1001        0 50002 1 0000000000000000 20 4 30 10 "
    "-1\n";

TcpEndpoint ep(const char* ip, int port) {
  auto e = make_tcp_endpoint(ip, port);
  EXPECT_TRUE(e.has_value()) << ip;
  return e.value_or(TcpEndpoint{});
}

TEST(TcpSockets, FindsTheUidOfTheClientsEnd) {
  EXPECT_EQ(find_socket_uid(kTcp, ep("127.0.0.1", 54321), ep("127.0.0.1", 15132)), 65534u);
  // The server's end of the same connection is another row, owned by the server.
  EXPECT_EQ(find_socket_uid(kTcp, ep("127.0.0.1", 15132), ep("127.0.0.1", 54321)), 0u);
  EXPECT_EQ(find_socket_uid(kTcp, ep("127.0.0.1", 54329), ep("127.0.0.1", 15132)), std::nullopt);
  EXPECT_EQ(find_socket_uid(kTcp, ep("127.0.0.2", 54321), ep("127.0.0.1", 15132)), std::nullopt);
}

TEST(TcpSockets, ClosedSocketsWithoutInodeAreNotRoot) {
  EXPECT_EQ(find_socket_uid(kTcp, ep("127.0.0.1", 54322), ep("127.0.0.1", 15132)), std::nullopt);
}

TEST(TcpSockets, Ipv4MappedPeersMatchTheIpv4Table) {
  // A dual-stack server reports its IPv4 client as ::ffff:127.0.0.1.
  EXPECT_EQ(find_socket_uid(kTcp, ep("::ffff:127.0.0.1", 54321), ep("::ffff:127.0.0.1", 15132)),
            65534u);
  EXPECT_EQ(find_socket_uid(kTcp6, ep("::1", 54323), ep("[::1]", 15132)), 1000u);
  // An IPv6 client socket talking to an IPv4 server: mapped in tcp6, plain in what the server sees.
  EXPECT_EQ(find_socket_uid(kTcp6, ep("127.0.0.1", 54324), ep("127.0.0.1", 15132)), 1001u);
  EXPECT_EQ(find_socket_uid(kTcp6, ep("::1", 54324), ep("::1", 15132)), std::nullopt);
}

TEST(TcpSockets, EndpointsNeedAnIpAndAPort) {
  for (const char* bad : {"", "localhost", "127.0.0", "::g", "[::1"})
    EXPECT_FALSE(make_tcp_endpoint(bad, 80).has_value()) << bad;
  EXPECT_FALSE(make_tcp_endpoint("127.0.0.1", -1).has_value());
  EXPECT_FALSE(make_tcp_endpoint("127.0.0.1", 65536).has_value());
  EXPECT_EQ(make_tcp_endpoint("127.0.0.1", 80), make_tcp_endpoint("::ffff:127.0.0.1", 80));
  EXPECT_NE(make_tcp_endpoint("127.0.0.1", 80), make_tcp_endpoint("::1", 80));
}

TEST(TcpSockets, ReadsBothTablesUnderTheRootAndSaysWhyNothingMatched) {
  std::string tmpl = (std::filesystem::temp_directory_path() / "gpud-tcp-XXXXXX").string();
  ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
  std::filesystem::create_directories(tmpl + "/proc/net");
  HostFs fs(tmpl);
  auto none = tcp_socket_owner(fs, ep("::1", 54323), ep("::1", 15132));
  ASSERT_FALSE(none);
  EXPECT_NE(none.error().message.find("cannot read the TCP socket tables"), std::string::npos)
      << none.error().message;

  std::ofstream(tmpl + "/proc/net/tcp") << kTcp;  // no tcp6: a kernel without IPv6
  auto v4 = tcp_socket_owner(fs, ep("127.0.0.1", 54321), ep("127.0.0.1", 15132));
  ASSERT_TRUE(v4) << v4.error().message;
  EXPECT_EQ(*v4, 65534u);
  std::ofstream(tmpl + "/proc/net/tcp6") << kTcp6;
  auto v6 = tcp_socket_owner(fs, ep("::1", 54323), ep("::1", 15132));
  ASSERT_TRUE(v6) << v6.error().message;
  EXPECT_EQ(*v6, 1000u);
  auto gone = tcp_socket_owner(fs, ep("127.0.0.1", 54322), ep("127.0.0.1", 15132));
  ASSERT_FALSE(gone);
  EXPECT_NE(gone.error().message.find("not in " + tmpl + "/proc/net/tcp"), std::string::npos)
      << gone.error().message;
  std::filesystem::remove_all(tmpl);
}

// The one check against this kernel: the byte order of its tables is what the parser expects.
TEST(TcpSockets, FindsTheOwnerOfALiveLoopbackConnection) {
  int server = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  ASSERT_EQ(::bind(server, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(server, 1), 0);
  ASSERT_EQ(::getsockname(server, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  int client = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_EQ(::connect(client, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  sockaddr_in mine{};
  len = sizeof mine;
  ASSERT_EQ(::getsockname(client, reinterpret_cast<sockaddr*>(&mine), &len), 0);
  auto uid = tcp_socket_owner(HostFs("/"), ep("127.0.0.1", ntohs(mine.sin_port)),
                              ep("127.0.0.1", ntohs(addr.sin_port)));
  ::close(client);
  ::close(server);
  ASSERT_TRUE(uid) << uid.error().message;
  EXPECT_EQ(*uid, ::geteuid());
}

}  // namespace
}  // namespace gpud::host
