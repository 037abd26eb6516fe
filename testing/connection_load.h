// Test helper: client connections that hold a server busy the way an attacker or a crowd of idle
// clients would (idle keep-alive, a request header trickling in, a connection that sends nothing),
// over plain TCP or TLS, for the starvation and shutdown tests; and a flood of idle connections
// from several loopback addresses that reopens what the server closes.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace gpud::testing {

// A TCP socket connected to 127.0.0.1:port from `source` (an IPv4 address of this host; every
// 127.0.0.0/8 address is, on Linux), blocking, with the connect and writes bounded by 1 s and reads
// by 5 s; -1 when it cannot connect.
inline int connect_from(const char* source, int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  timeval limit{1, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &limit, sizeof limit);
  timeval read_limit{5, 0};  // bounds a TLS handshake the server never answers
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &read_limit, sizeof read_limit);
  // The port is picked at connect, for the whole address pair: thousands of reconnects from one
  // source address do not run out of ports.
  int yes = 1;
  ::setsockopt(fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &yes, sizeof yes);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  ::inet_pton(AF_INET, source, &addr.sin_addr);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return -1;
  }
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// One blocking client connection to 127.0.0.1:port from `source`; over TLS (any certificate) when
// `tls`.
class TestConnection {
 public:
  TestConnection(int port, bool tls, const char* source = "127.0.0.1") {
    ::signal(SIGPIPE, SIG_IGN);  // writes to a connection the server closed
    fd_ = connect_from(source, port);
    if (fd_ < 0) return;
    int yes = 1;
    ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof yes);
    if (tls) {
      ctx_ = SSL_CTX_new(TLS_client_method());
      ssl_ = SSL_new(ctx_);
      SSL_set_fd(ssl_, fd_);
      if (SSL_connect(ssl_) != 1) return;
    }
    ok_ = true;
  }
  ~TestConnection() {
    if (ssl_ != nullptr) SSL_free(ssl_);
    if (ctx_ != nullptr) SSL_CTX_free(ctx_);
    if (fd_ >= 0) ::close(fd_);
  }
  TestConnection(const TestConnection&) = delete;
  TestConnection& operator=(const TestConnection&) = delete;

  bool ok() const { return ok_; }
  int fd() const { return fd_; }

  bool send(std::string_view s) {
    if (!ok_) return false;
    if (ssl_ != nullptr) return SSL_write(ssl_, s.data(), static_cast<int>(s.size())) > 0;
    return ::send(fd_, s.data(), s.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(s.size());
  }

  // One response (head and Content-Length body), or "" when none arrives within `timeout`.
  std::string read_response(std::chrono::milliseconds timeout) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      auto head_end = buf_.find("\r\n\r\n");
      if (head_end != std::string::npos) {
        size_t body = 0;
        auto at = buf_.find("Content-Length: ");
        if (at != std::string::npos && at < head_end)
          body = std::strtoul(&buf_[at + 16], nullptr, 10);
        if (buf_.size() >= head_end + 4 + body) {
          std::string out = buf_.substr(0, head_end + 4 + body);
          buf_.erase(0, out.size());
          return out;
        }
      }
      if (receive(deadline) <= 0) return "";
    }
  }

  // Whether the server closes the connection within `timeout` (without sending anything more).
  bool closed_within(std::chrono::milliseconds timeout) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      int n = receive(deadline);
      if (n == 0) return true;
      if (n == kTimedOut) return false;
      if (n < 0) return true;  // reset or error: closed
    }
  }

 private:
  static constexpr int kTimedOut = -2;

  // Appends what arrives before the deadline; the count, 0 at the end of the stream, -1 on an
  // error, kTimedOut at the deadline.
  int receive(std::chrono::steady_clock::time_point deadline) {
    auto left =
        std::chrono::ceil<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (ssl_ == nullptr || SSL_pending(ssl_) == 0) {
      pollfd p{fd_, POLLIN, 0};
      if (left.count() <= 0 || ::poll(&p, 1, static_cast<int>(left.count())) <= 0) return kTimedOut;
    }
    char chunk[16384];
    int n = ssl_ != nullptr ? SSL_read(ssl_, chunk, sizeof chunk)
                            : static_cast<int>(::recv(fd_, chunk, sizeof chunk, 0));
    if (n > 0) buf_.append(chunk, static_cast<size_t>(n));
    if (n < 0 && ssl_ != nullptr && SSL_get_error(ssl_, n) == SSL_ERROR_ZERO_RETURN) return 0;
    if (n < 0 && ssl_ != nullptr && SSL_get_error(ssl_, n) == SSL_ERROR_SYSCALL) return 0;
    return n;
  }

  int fd_ = -1;
  SSL_CTX* ctx_ = nullptr;
  SSL* ssl_ = nullptr;
  bool ok_ = false;
  std::string buf_;
};

inline constexpr std::string_view kHealthzRequest =
    "GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n";

// The load of the starvation tests: `idle` keep-alive connections that made one request and wait,
// `slow` whose request header arrives one byte every `drip` (an 8 KiB header at that pace takes
// hours), and `silent` TCP connections that never send a byte (no TLS handshake either).
class StarvationLoad {
 public:
  StarvationLoad(int port, bool tls, size_t idle = 200, size_t slow = 50, size_t silent = 4,
                 std::chrono::milliseconds drip = std::chrono::seconds(3)) {
    for (size_t i = 0; i < idle; ++i) {
      auto c = std::make_unique<TestConnection>(port, tls);
      if (c->send(kHealthzRequest) && !c->read_response(std::chrono::seconds(5)).empty())
        ++idle_ok_;
      connections_.push_back(std::move(c));
    }
    for (size_t i = 0; i < slow; ++i) {
      auto c = std::make_unique<TestConnection>(port, tls);
      if (c->send("GET /healthz HTTP/1.1\r\nHost: localhost\r\nX-Slow: ")) ++slow_ok_;
      slow_.push_back(c.get());
      connections_.push_back(std::move(c));
    }
    for (size_t i = 0; i < silent; ++i)
      connections_.push_back(std::make_unique<TestConnection>(port, false));
    dripper_ = std::thread([this, drip] {
      while (!stop_) {
        for (int i = 0; i < drip.count() / 10 && !stop_; ++i)
          std::this_thread::sleep_for(std::chrono::milliseconds(10));
        for (TestConnection* c : slow_) c->send("a");
      }
    });
  }
  ~StarvationLoad() {
    stop_ = true;
    dripper_.join();
  }
  // How many idle connections got their first answer, and slow ones could start their request.
  size_t idle_ok() const { return idle_ok_; }
  size_t slow_ok() const { return slow_ok_; }

 private:
  std::vector<std::unique_ptr<TestConnection>> connections_;
  std::vector<TestConnection*> slow_;
  std::thread dripper_;
  std::atomic<bool> stop_{false};
  size_t idle_ok_ = 0;
  size_t slow_ok_ = 0;
};

// Connections from each of `sources` (per_source of them) to 127.0.0.1:port that never send a
// byte; whichever the server closes is opened again at once, as by an attacker who means to hold
// the server's connection table. On a thread of its own until destroyed.
class IdleFlood {
 public:
  IdleFlood(int port, std::vector<std::string> sources, size_t per_source)
      : port_(port), sources_(std::move(sources)) {
    for (const auto& source : sources_)
      for (size_t i = 0; i < per_source; ++i) slots_.push_back({-1, source.c_str()});
    thread_ = std::thread([this] { run(); });
  }
  ~IdleFlood() {
    stop_ = true;
    thread_.join();
    for (auto& s : slots_)
      if (s.fd >= 0) ::close(s.fd);
  }
  IdleFlood(const IdleFlood&) = delete;
  IdleFlood& operator=(const IdleFlood&) = delete;

  size_t open() const { return open_; }          // connections open now
  size_t connects() const { return connects_; }  // connections made in all

 private:
  struct Slot {
    int fd;
    const char* source;
  };

  void run() {
    std::vector<pollfd> polled;
    while (!stop_) {
      size_t open = 0;
      for (auto& s : slots_) {
        if (s.fd < 0 && !stop_) {
          s.fd = connect_from(s.source, port_);
          if (s.fd >= 0) ++connects_;
        }
        if (s.fd >= 0) ++open;
      }
      open_ = open;
      polled.clear();
      for (const auto& s : slots_) polled.push_back({s.fd, POLLIN | POLLRDHUP, 0});
      if (::poll(polled.data(), polled.size(), 50) <= 0) continue;
      for (size_t i = 0; i < slots_.size(); ++i) {
        if (polled[i].fd < 0 || polled[i].revents == 0) continue;
        char buf[4096];
        ssize_t n = ::recv(slots_[i].fd, buf, sizeof buf, MSG_DONTWAIT);
        if (n > 0 || (n < 0 && (errno == EAGAIN || errno == EINTR))) continue;
        ::close(slots_[i].fd);
        slots_[i].fd = -1;
      }
    }
  }

  int port_;
  std::vector<std::string> sources_;
  std::vector<Slot> slots_;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::atomic<size_t> open_{0};
  std::atomic<size_t> connects_{0};
};

}  // namespace gpud::testing
