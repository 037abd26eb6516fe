#include "server/connection_loop.h"

#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "server/tls.h"
#include "testing/connection_load.h"
#include "testing/log_capture.h"

namespace gpud::server {
namespace {

using namespace std::chrono_literals;
using gpud::testing::kHealthzRequest;
using gpud::testing::StarvationLoad;
using gpud::testing::TestConnection;

// A loop on 127.0.0.1 whose /healthz answers "ok", /big?bytes=N N bytes, /slow takes 300 ms and
// /sleep?ms=N N ms.
class LoopServer {
 public:
  explicit LoopServer(ConnectionLimits limits, bool tls = false) {
    auto http = std::make_unique<RequestHandler>();
    http->Get("/healthz", [](const httplib::Request&, httplib::Response& res) {
      res.set_content("ok", "text/plain");
    });
    http->Get("/big", [](const httplib::Request& req, httplib::Response& res) {
      std::string body(std::stoul(req.get_param_value("bytes")), 'x');
      for (size_t i = 0; i < body.size(); i += 4096)
        body[i] = static_cast<char>('a' + i / 4096 % 26);
      res.set_content(body, "text/plain");
    });
    http->Get("/slow", [](const httplib::Request&, httplib::Response& res) {
      std::this_thread::sleep_for(300ms);
      res.set_content("slow", "text/plain");
    });
    http->Get("/sleep", [](const httplib::Request& req, httplib::Response& res) {
      std::this_thread::sleep_for(std::chrono::milliseconds(std::stoul(req.get_param_value("ms"))));
      res.set_content("slept", "text/plain");
    });
    http->Post("/echo", [](const httplib::Request& req, httplib::Response& res) {
      res.set_content(req.body, "text/plain");
    });
    port_ = http->bind_to_any_port("127.0.0.1");
    std::unique_ptr<LazyTlsContext> ctx;
    if (tls) {
      auto material = generate_self_signed();
      EXPECT_TRUE(material.ok());
      ctx = std::make_unique<LazyTlsContext>(std::move(*material));
    }
    loop_ = std::make_unique<ConnectionLoop>(std::move(http), std::move(ctx), limits, "test");
    auto r = loop_->start();
    EXPECT_TRUE(r.ok()) << r.error().message;
  }
  int port() const { return port_; }
  ConnectionLoop& loop() { return *loop_; }

 private:
  int port_ = 0;
  std::unique_ptr<ConnectionLoop> loop_;
};

std::string status_line(const std::string& response) {
  return response.substr(0, response.find("\r\n"));
}

TEST(ConnectionLoop, ServesKeepAlivePipelinedAndHalfClosedRequests) {
  LoopServer s(ConnectionLimits{});
  TestConnection c(s.port(), false);
  ASSERT_TRUE(c.ok());
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(c.send(kHealthzRequest));
    EXPECT_EQ(status_line(c.read_response(2s)), "HTTP/1.1 200 OK");
  }
  // Two requests in one write, the second with a body: both answered, in order.
  ASSERT_TRUE(c.send(std::string(kHealthzRequest) +
                     "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello"));
  EXPECT_EQ(status_line(c.read_response(2s)), "HTTP/1.1 200 OK");
  std::string echo = c.read_response(2s);
  EXPECT_EQ(echo.substr(echo.size() - 5), "hello") << echo;

  // A client that sends its request and shuts its sending side still gets the answer.
  TestConnection half(s.port(), false);
  ASSERT_TRUE(half.send("GET /healthz HTTP/1.0\r\n\r\n"));
  ::shutdown(half.fd(), SHUT_WR);
  EXPECT_EQ(status_line(half.read_response(2s)), "HTTP/1.1 200 OK");
}

// TCP_NODELAY of the server's end of the connection whose client end is `client_fd` (the server
// runs in this process, so its sockets are among our descriptors); -1 when none is found.
int server_side_nodelay(int client_fd) {
  sockaddr_in client{};
  socklen_t len = sizeof client;
  ::getsockname(client_fd, reinterpret_cast<sockaddr*>(&client), &len);
  for (int fd = 0; fd < 4096; ++fd) {
    sockaddr_in peer{};
    socklen_t plen = sizeof peer;
    if (fd == client_fd || ::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &plen) != 0 ||
        peer.sin_family != AF_INET || peer.sin_port != client.sin_port)
      continue;
    int on = 0;
    socklen_t olen = sizeof on;
    if (::getsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, &olen) == 0) return on;
  }
  return -1;
}

// Without TCP_NODELAY a response written in two parts (a large one is) waits for the client's
// delayed ACK, ~40 ms; the round-trip tests cannot see it for small responses, which leave in one
// write, so this looks at the socket itself.
TEST(ConnectionLoop, EveryAcceptedTcpConnectionHasNoDelay) {
  for (bool tls : {false, true}) {
    LoopServer s(ConnectionLimits{}, tls);
    TestConnection c(s.port(), tls);
    ASSERT_TRUE(c.send(kHealthzRequest));
    ASSERT_FALSE(c.read_response(2s).empty());
    EXPECT_EQ(server_side_nodelay(c.fd()), 1) << (tls ? "tls" : "plain");
  }
}

// A body over the read-ahead size, a chunked one and one behind "Expect: 100-continue" are read
// by the worker.
TEST(ConnectionLoop, BodiesTheLoopDoesNotReadAheadReachTheHandler) {
  ConnectionLimits limits;
  limits.max_body_bytes = 1024;
  LoopServer s(limits);
  httplib::Client cli("127.0.0.1", s.port());
  cli.set_read_timeout(5s);
  const std::string big(200 * 1024, 'b');
  auto res = cli.Post("/echo", big, "text/plain");
  ASSERT_TRUE(res) << httplib::to_string(res.error());
  EXPECT_EQ(res->body, big);

  TestConnection c(s.port(), false);
  ASSERT_TRUE(
      c.send("POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: "
             "chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"));
  std::string chunked = c.read_response(2s);
  EXPECT_EQ(chunked.substr(chunked.size() - 5), "hello") << chunked;
  ASSERT_TRUE(
      c.send("POST /echo HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: "
             "5\r\n\r\n"));
  EXPECT_EQ(status_line(c.read_response(2s)), "HTTP/1.1 100 Continue");
  ASSERT_TRUE(c.send("world"));
  std::string expected = c.read_response(2s);
  EXPECT_EQ(expected.substr(expected.size() - 5), "world") << expected;
}

TEST(ConnectionLoop, IdleConnectionsAndSlowRequestsAreClosedAtTheirDeadlines) {
  ConnectionLimits limits;
  limits.idle_timeout = 300ms;
  limits.request_timeout = 500ms;
  LoopServer s(limits);
  TestConnection idle(s.port(), false);
  ASSERT_TRUE(idle.send(kHealthzRequest));
  ASSERT_FALSE(idle.read_response(2s).empty());
  TestConnection silent(s.port(), false);
  TestConnection slow(s.port(), false);
  ASSERT_TRUE(slow.send("GET /healthz HTTP/1.1\r\nX-Slow: "));
  std::thread drip([&] {
    for (int i = 0; i < 10; ++i) {
      std::this_thread::sleep_for(100ms);
      slow.send("a");
    }
  });
  auto start = std::chrono::steady_clock::now();
  EXPECT_TRUE(idle.closed_within(2s));
  EXPECT_TRUE(silent.closed_within(2s));
  EXPECT_TRUE(slow.closed_within(2s)) << "a header that keeps trickling in has one deadline";
  drip.join();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 1500ms);
}

// Whether the server has closed c (within a short wait).
bool closed_soon(TestConnection& c) { return c.closed_within(300ms); }

// The status line of the answer to a /healthz request on c.
std::string healthz_status(TestConnection& c) {
  return c.send(kHealthzRequest) ? status_line(c.read_response(2s)) : "not sent";
}

// Connections that wait (for a first byte, or for the next request on keep-alive) give way to a
// newcomer when the table is full, the one that has waited longest first: idle clients cannot lock
// others out.
TEST(ConnectionLoop, AFullTableClosesItsLongestWaitingConnectionForANewcomer) {
  ConnectionLimits limits;
  limits.max_connections = 3;
  LoopServer s(limits);
  TestConnection silent(s.port(), false, "127.0.0.2");  // never sends a byte
  TestConnection partial(s.port(), false, "127.0.0.3");
  ASSERT_TRUE(partial.send("GET /healthz HTTP/1.1\r\nX-Slow: "));
  TestConnection keep_alive(s.port(), false, "127.0.0.4");
  ASSERT_EQ(healthz_status(keep_alive), "HTTP/1.1 200 OK");
  std::this_thread::sleep_for(50ms);

  TestConnection newcomer(s.port(), false, "127.0.0.5");
  EXPECT_EQ(healthz_status(newcomer), "HTTP/1.1 200 OK");
  EXPECT_TRUE(closed_soon(silent));
  EXPECT_FALSE(closed_soon(partial));

  // A connection served since waits anew, behind the others.
  ASSERT_TRUE(partial.send("a\r\n\r\n"));
  ASSERT_EQ(status_line(partial.read_response(2s)), "HTTP/1.1 200 OK");
  TestConnection next(s.port(), false, "127.0.0.6");
  EXPECT_EQ(healthz_status(next), "HTTP/1.1 200 OK");
  EXPECT_TRUE(closed_soon(keep_alive));
  EXPECT_FALSE(closed_soon(partial));
  EXPECT_FALSE(closed_soon(newcomer));
}

// A peer at its cap gets in by closing its own longest-waiting connection, never another peer's.
TEST(ConnectionLoop, APeerAtItsCapDisplacesItsOwnLongestWaitingConnection) {
  ConnectionLimits limits;
  limits.max_connections = 8;
  limits.max_connections_per_peer = 2;
  LoopServer s(limits);
  TestConnection other(s.port(), false, "127.0.0.3");
  TestConnection first(s.port(), false, "127.0.0.2");
  TestConnection second(s.port(), false, "127.0.0.2");
  std::this_thread::sleep_for(50ms);
  TestConnection third(s.port(), false, "127.0.0.2");
  EXPECT_EQ(healthz_status(third), "HTTP/1.1 200 OK");
  EXPECT_TRUE(closed_soon(first));
  EXPECT_FALSE(closed_soon(second));
  EXPECT_FALSE(closed_soon(other));
}

// Only when every connection is being served does a newcomer get a 503; once one is done, there is
// room again.
TEST(ConnectionLoop, ATableOfConnectionsBeingServedRefusesANewcomerWithA503) {
  ConnectionLimits limits;
  limits.max_connections = 2;
  gpud::testing::LogCapture log("server");
  LoopServer s(limits);
  std::vector<std::unique_ptr<TestConnection>> busy;
  for (int i = 0; i < 2; ++i) {
    busy.push_back(std::make_unique<TestConnection>(s.port(), false));
    ASSERT_TRUE(busy.back()->send("GET /sleep?ms=1500 HTTP/1.1\r\nHost: x\r\n\r\n"));
  }
  std::this_thread::sleep_for(200ms);
  TestConnection refused(s.port(), false, "127.0.0.2");
  ASSERT_TRUE(refused.send(kHealthzRequest));
  std::string answer = refused.read_response(2s);
  EXPECT_EQ(status_line(answer), "HTTP/1.1 503 Service Unavailable") << answer;
  EXPECT_NE(answer.find("too many connections"), std::string::npos) << answer;
  EXPECT_TRUE(refused.closed_within(2s));
  EXPECT_NE(log.text().find("refusing a connection from 127.0.0.2: 2 connections open, the limit "
                            "is 2, none of them waiting for a request"),
            std::string::npos)
      << log.text();

  for (auto& c : busy) ASSERT_EQ(status_line(c->read_response(3s)), "HTTP/1.1 200 OK");
  std::this_thread::sleep_for(100ms);  // the workers give the connections back after answering
  TestConnection next(s.port(), false, "127.0.0.2");
  EXPECT_EQ(healthz_status(next), "HTTP/1.1 200 OK");
}

// Connections from other addresses, even all being served, leave the reserve to 127.0.0.1 (where
// the liveness probe comes from).
TEST(ConnectionLoop, TheReserveAdmitsLoopbackWhileOtherAddressesHoldTheTable) {
  ConnectionLimits limits;
  limits.max_connections = 8;
  limits.reserved_for_local = 2;
  limits.workers = 6;
  limits.inline_paths = {"/healthz"};
  LoopServer s(limits);
  std::vector<std::unique_ptr<TestConnection>> busy;
  for (const char* source :
       {"127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5", "127.0.0.6", "127.0.0.7"}) {
    busy.push_back(std::make_unique<TestConnection>(s.port(), false, source));
    ASSERT_TRUE(busy.back()->send("GET /sleep?ms=1500 HTTP/1.1\r\nHost: x\r\n\r\n"));
  }
  std::this_thread::sleep_for(200ms);
  for (const char* source : {"127.0.0.8", "127.0.0.9"}) {
    busy.push_back(std::make_unique<TestConnection>(s.port(), false, source));
    ASSERT_TRUE(busy.back()->send(kHealthzRequest));
    EXPECT_EQ(status_line(busy.back()->read_response(2s)), "HTTP/1.1 503 Service Unavailable");
    busy.pop_back();
  }
  for (int i = 0; i < 3; ++i) {
    TestConnection probe(s.port(), false, "127.0.0.1");
    ASSERT_TRUE(probe.send(kHealthzRequest));
    EXPECT_EQ(status_line(probe.read_response(1s)), "HTTP/1.1 200 OK") << "probe " << i;
  }
  for (auto& c : busy) EXPECT_EQ(status_line(c->read_response(3s)), "HTTP/1.1 200 OK");
}

// A method the listener does not serve is answered 405 at once, its body unread, and the
// connection closed, also behind a pipelined request; so is a body where bodies are not read (413);
// the one worker stays free.
TEST(ConnectionLoop, AMethodNotServedIsAnswered405AndABodyNotRead413AtOnce) {
  ConnectionLimits limits;
  limits.workers = 1;
  limits.max_body_bytes = 0;
  limits.methods = {"GET", "HEAD"};
  limits.worker_reads_bodies = false;
  LoopServer s(limits);
  std::vector<std::unique_ptr<TestConnection>> posts;
  for (const char* request :
       {"POST /echo HTTP/1.1\r\nHost: x\r\n\r\n",
        "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n",
        "PUT /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n", "DELETE /echo"}) {
    posts.push_back(std::make_unique<TestConnection>(s.port(), false));
    ASSERT_TRUE(posts.back()->send(request));
    std::string answer = posts.back()->read_response(1s);
    EXPECT_EQ(status_line(answer), "HTTP/1.1 405 Method Not Allowed") << request;
    EXPECT_NE(answer.find("Allow: GET, HEAD\r\n"), std::string::npos) << answer;
    EXPECT_TRUE(posts.back()->closed_within(1s)) << request;
  }
  TestConnection promised_body(s.port(), false);
  ASSERT_TRUE(promised_body.send("GET /healthz HTTP/1.1\r\nContent-Length: 100000\r\n\r\n"));
  EXPECT_EQ(status_line(promised_body.read_response(1s)), "HTTP/1.1 413 Payload Too Large");
  EXPECT_TRUE(promised_body.closed_within(1s));
  TestConnection pipelined(s.port(), false);
  ASSERT_TRUE(pipelined.send(std::string(kHealthzRequest) + "POST /echo HTTP/1.1\r\n\r\n"));
  EXPECT_EQ(status_line(pipelined.read_response(1s)), "HTTP/1.1 200 OK");
  EXPECT_EQ(status_line(pipelined.read_response(1s)), "HTTP/1.1 405 Method Not Allowed");
  EXPECT_TRUE(pipelined.closed_within(1s));
  auto start = std::chrono::steady_clock::now();
  TestConnection get(s.port(), false);
  ASSERT_TRUE(get.send(kHealthzRequest));
  EXPECT_EQ(status_line(get.read_response(1s)), "HTTP/1.1 200 OK");
  EXPECT_LT(std::chrono::steady_clock::now() - start, 500ms);
}

// The descriptors of this process that are open now.
size_t open_fds() {
  size_t n = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator("/proc/self/fd"))
    ++n;
  return n;
}

// A connect flood from a process with a low file descriptor limit (256): the table (half the
// limit) keeps the newest connections and closes those that waited longest, so the descriptors in
// use stay within the table; one warning says so, and the server answers during and after the
// flood.
TEST(ConnectionLoop, AConnectFloodUnderALowFdLimitStaysWithinTheTableAndIsLoggedOnce) {
  rlimit saved{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &saved), 0);
  rlimit low{256, saved.rlim_max};
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &low), 0);
  gpud::testing::LogCapture log("server");
  {
    LoopServer s(ConnectionLimits{});
    const int port = s.port();
    const size_t fds_before = open_fds();
    int connected[2];
    ASSERT_EQ(::pipe(connected), 0);
    pid_t flood = ::fork();
    if (flood == 0) {
      // The flood has its own, higher limit: 600 connections, held for a second.
      rlimit high{2048, saved.rlim_max};
      ::setrlimit(RLIMIT_NOFILE, &high);
      sockaddr_in addr{};
      addr.sin_family = AF_INET;
      addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      addr.sin_port = htons(static_cast<uint16_t>(port));
      for (int i = 0; i < 600; ++i) {
        int fd = ::socket(AF_INET, SOCK_STREAM, 0);
        if (fd >= 0) ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
      }
      [[maybe_unused]] auto n = ::write(connected[1], "x", 1);
      ::sleep(1);
      ::_exit(0);
    }
    ASSERT_GT(flood, 0);
    ::close(connected[1]);
    char done = 0;
    ASSERT_EQ(::read(connected[0], &done, 1), 1);
    ::close(connected[0]);
    std::this_thread::sleep_for(300ms);  // the loop takes what is queued
    EXPECT_LE(open_fds(), fds_before + 128 + 4);
    TestConnection during(port, false);
    ASSERT_TRUE(during.send(kHealthzRequest));
    EXPECT_EQ(status_line(during.read_response(1s)), "HTTP/1.1 200 OK");
    int status = 0;
    ::waitpid(flood, &status, 0);
    EXPECT_EQ(log.count("closing a waiting connection"), 1u) << log.text();
    EXPECT_EQ(log.count("refusing a connection"), 0u) << log.text();
    EXPECT_NE(log.text().find("the limit is 128"), std::string::npos) << log.text();
    bool answered = false;
    for (int i = 0; i < 50 && !answered; ++i) {
      TestConnection c(port, false);
      answered = c.send(kHealthzRequest) && status_line(c.read_response(1s)) == "HTTP/1.1 200 OK";
      if (!answered) std::this_thread::sleep_for(100ms);
    }
    EXPECT_TRUE(answered);
  }
  ::setrlimit(RLIMIT_NOFILE, &saved);
}

TEST(ConnectionLoop, StopClosesEveryConnectionPromptly) {
  LoopServer s(ConnectionLimits{}, /*tls=*/true);
  {
    StarvationLoad load(s.port(), true, 20, 10, 4, 100ms);
    EXPECT_EQ(load.idle_ok(), 20u);
    TestConnection busy(s.port(), true);
    ASSERT_TRUE(busy.send("GET /slow HTTP/1.1\r\nHost: x\r\n\r\n"));
    std::this_thread::sleep_for(50ms);
    auto start = std::chrono::steady_clock::now();
    s.loop().stop();
    EXPECT_LT(std::chrono::steady_clock::now() - start, 1s);
  }
}

// The requirement behind the loop: /healthz answers at once while 200 idle keep-alive clients,
// 50 whose headers trickle in and 4 that never send a byte are connected (httplib's own loop had a
// worker per connection: 4 such connections made the API unreachable).
// An inline path is answered by the loop thread: with the only worker busy for 300 ms, /healthz
// answers at once; a path that is not inline waits for the worker. Pipelined inline requests, more
// than the loop serves in a row, and a request of another method among them all get their answers,
// in order.
TEST(ConnectionLoop, InlinePathsAreAnsweredWithoutAWorker) {
  for (bool tls : {false, true}) {
    ConnectionLimits limits;
    limits.workers = 1;
    limits.inline_paths = {"/healthz"};
    LoopServer s(limits, tls);
    TestConnection busy(s.port(), tls);
    ASSERT_TRUE(busy.send("GET /slow HTTP/1.1\r\nHost: x\r\n\r\n"));
    std::this_thread::sleep_for(50ms);  // the worker has taken it
    TestConnection probe(s.port(), tls);
    ASSERT_TRUE(probe.ok());
    auto t0 = std::chrono::steady_clock::now();
    ASSERT_TRUE(probe.send("GET /healthz?verbose=1 HTTP/1.1\r\nHost: x\r\n\r\n"));
    EXPECT_EQ(status_line(probe.read_response(2s)), "HTTP/1.1 200 OK");
    EXPECT_LT(std::chrono::steady_clock::now() - t0, 150ms) << (tls ? "tls" : "plain");
    EXPECT_EQ(status_line(busy.read_response(2s)), "HTTP/1.1 200 OK");

    std::string burst;
    for (int i = 0; i < 40; ++i) burst += kHealthzRequest;
    burst += "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhi";
    burst += kHealthzRequest;
    ASSERT_TRUE(probe.send(burst));
    for (int i = 0; i < 40; ++i)
      ASSERT_EQ(status_line(probe.read_response(2s)), "HTTP/1.1 200 OK") << i;
    std::string echo = probe.read_response(2s);
    EXPECT_EQ(echo.substr(echo.size() - 2), "hi") << echo;
    EXPECT_EQ(status_line(probe.read_response(2s)), "HTTP/1.1 200 OK");
  }
}

// An inline response larger than the socket takes at once: the loop sends what it can and a worker
// finishes it, intact, while the loop goes on answering others; a client that asked to close gets
// the whole response before the close.
TEST(ConnectionLoop, AnInlineResponseTheSocketCannotTakeIsFinishedByAWorker) {
  for (bool tls : {false, true}) {
    ConnectionLimits limits;
    limits.workers = 1;
    limits.inline_paths = {"/healthz", "/big"};
    LoopServer s(limits, tls);
    TestConnection big(s.port(), tls);
    // More than the server's socket can hold however the machine sizes its buffers: the largest
    // send buffer (tcp_wmem's maximum) and a receive buffer kept small.
    size_t wmem_min = 0, wmem_default = 0, wmem_max = 4 << 20;
    std::ifstream("/proc/sys/net/ipv4/tcp_wmem") >> wmem_min >> wmem_default >> wmem_max;
    const size_t bytes = std::max<size_t>(8 << 20, 2 * wmem_max);
    int rcvbuf = 64 << 10;
    ::setsockopt(big.fd(), SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
    ASSERT_TRUE(big.send("GET /big?bytes=" + std::to_string(bytes) +
                         " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
    std::this_thread::sleep_for(200ms);  // not reading: the socket fills
    TestConnection probe(s.port(), tls);
    auto t0 = std::chrono::steady_clock::now();
    ASSERT_TRUE(probe.send(kHealthzRequest));
    EXPECT_EQ(status_line(probe.read_response(2s)), "HTTP/1.1 200 OK");
    EXPECT_LT(std::chrono::steady_clock::now() - t0, 150ms) << (tls ? "tls" : "plain");
    std::string response = big.read_response(10s);
    ASSERT_EQ(status_line(response), "HTTP/1.1 200 OK") << (tls ? "tls" : "plain");
    std::string body = response.substr(response.find("\r\n\r\n") + 4);
    ASSERT_EQ(body.size(), bytes);
    for (size_t i = 0; i < body.size(); i += 4096)
      ASSERT_EQ(body[i], static_cast<char>('a' + i / 4096 % 26)) << i;
    EXPECT_TRUE(big.closed_within(2s));
  }
}

TEST(ConnectionLoop, HealthzAnswersWithin100msUnderStarvationLoad) {
  for (bool tls : {false, true}) {
    LoopServer s(ConnectionLimits{}, tls);
    StarvationLoad load(s.port(), tls, 200, 50, 4, 1s);
    EXPECT_EQ(load.idle_ok(), 200u);
    EXPECT_EQ(load.slow_ok(), 50u);
    for (int i = 0; i < 3; ++i) {
      std::this_thread::sleep_for(400ms);
      auto start = std::chrono::steady_clock::now();
      TestConnection c(s.port(), tls);
      ASSERT_TRUE(c.send(kHealthzRequest));
      std::string res = c.read_response(2s);
      auto elapsed = std::chrono::steady_clock::now() - start;
      EXPECT_EQ(status_line(res), "HTTP/1.1 200 OK") << (tls ? "tls" : "plain");
      EXPECT_LT(elapsed, 100ms)
          << (tls ? "tls " : "plain ")
          << std::chrono::duration_cast<std::chrono::milliseconds>(elapsed).count() << " ms";
    }
  }
}

}  // namespace
}  // namespace gpud::server
