#include "host/tcp_connect.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

namespace gpud::host {
namespace {

// A listening socket on 127.0.0.1 with an ephemeral port; closed at scope exit.
struct Listener {
  int fd = -1;
  uint16_t port = 0;
  Listener() {
    fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (::bind(fd, reinterpret_cast<sockaddr*>(&a), len) == 0 && ::listen(fd, 16) == 0 &&
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0)
      port = ntohs(a.sin_port);
  }
  ~Listener() { ::close(fd); }
};

TEST(TcpTarget, ParsesHostPortAndBracketedIpv6) {
  auto a = parse_tcp_target("example.com:443");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->host, "example.com");
  EXPECT_EQ(a->port, 443);
  auto b = parse_tcp_target("[::1]:8080");
  ASSERT_TRUE(b);
  EXPECT_EQ(b->host, "::1");
  EXPECT_EQ(b->port, 8080);
  EXPECT_EQ(b->text, "[::1]:8080");
}

TEST(TcpTarget, RefusesWhatIsNoHostPort) {
  for (const char* bad : {"example.com", ":80", "host:0", "host:65536", "host:http", "::1:80",
                          "[::1]80", "[::1]:", ""})
    EXPECT_FALSE(parse_tcp_target(bad)) << bad;
}

TEST(TcpConnect, MeasuresAListeningSocketAndNamesARefusedOne) {
  Listener open;
  ASSERT_NE(open.port, 0);
  uint16_t closed_port = 0;
  {
    Listener closed;  // bound, then closed: nothing listens there any more
    closed_port = closed.port;
  }
  auto t1 = parse_tcp_target("127.0.0.1:" + std::to_string(open.port));
  auto t2 = parse_tcp_target("127.0.0.1:" + std::to_string(closed_port));
  ASSERT_TRUE(t1 && t2);
  auto r = measure_tcp_connect({*t1, *t2}, std::chrono::milliseconds(2000));
  ASSERT_EQ(r.size(), 2u);
  ASSERT_TRUE(r[0].latency.has_value()) << r[0].error;
  EXPECT_LT(r[0].latency->count(), 2'000'000);
  EXPECT_FALSE(r[1].latency.has_value());
  EXPECT_EQ(r[1].error, "Connection refused");
}

TEST(TcpConnect, UnresolvableNameIsAnError) {
  auto t = parse_tcp_target("gpud-no-such-host.invalid:80");
  ASSERT_TRUE(t);
  auto r = measure_tcp_connect({*t}, std::chrono::milliseconds(500));
  ASSERT_EQ(r.size(), 1u);
  EXPECT_FALSE(r[0].latency.has_value());
  EXPECT_NE(r[0].error.find("cannot resolve gpud-no-such-host.invalid"), std::string::npos)
      << r[0].error;
}

}  // namespace
}  // namespace gpud::host
