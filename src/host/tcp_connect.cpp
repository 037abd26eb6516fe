#include "host/tcp_connect.h"

#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/parse_number.h"

namespace gpud::host {

Result<TcpTarget> parse_tcp_target(std::string_view text) {
  TcpTarget t;
  t.text = std::string(text);
  std::string_view port;
  if (!text.empty() && text.front() == '[') {
    size_t close = text.find(']');
    if (close == std::string_view::npos || close + 1 >= text.size() || text[close + 1] != ':')
      return make_error("\"" + t.text + "\": want [ipv6]:port");
    t.host = std::string(text.substr(1, close - 1));
    port = text.substr(close + 2);
  } else {
    size_t colon = text.rfind(':');
    if (colon == std::string_view::npos) return make_error("\"" + t.text + "\": want host:port");
    t.host = std::string(text.substr(0, colon));
    port = text.substr(colon + 1);
    if (t.host.find(':') != std::string::npos)
      return make_error("\"" + t.text + "\": write an IPv6 address as [address]:port");
  }
  if (t.host.empty()) return make_error("\"" + t.text + "\": no host");
  auto p = parse_integer<uint32_t>(port);
  if (!p || *p == 0 || *p > 65535) return make_error("\"" + t.text + "\": port not 1-65535");
  t.port = static_cast<uint16_t>(*p);
  return t;
}

namespace {

struct Attempt {
  int fd = -1;
  std::chrono::steady_clock::time_point start;
};

}  // namespace

std::vector<TcpConnectResult> measure_tcp_connect(const std::vector<TcpTarget>& targets,
                                                  std::chrono::milliseconds timeout) {
  using Steady = std::chrono::steady_clock;
  std::vector<TcpConnectResult> results(targets.size());
  std::vector<Attempt> attempts(targets.size());
  for (size_t i = 0; i < targets.size(); ++i) {
    const TcpTarget& t = targets[i];
    results[i].target = t.text;
    addrinfo hints{};
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV;
    addrinfo* ai = nullptr;
    const std::string port = std::to_string(t.port);
    if (int rc = ::getaddrinfo(t.host.c_str(), port.c_str(), &hints, &ai); rc != 0 || !ai) {
      results[i].error = std::string("cannot resolve ") + t.host + ": " + ::gai_strerror(rc);
      continue;
    }
    int fd = ::socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      results[i].error = std::string("socket: ") + std::strerror(errno);
      ::freeaddrinfo(ai);
      continue;
    }
    attempts[i].start = Steady::now();
    int rc = ::connect(fd, ai->ai_addr, ai->ai_addrlen);
    int err = errno;
    ::freeaddrinfo(ai);
    if (rc == 0) {
      results[i].latency =
          std::chrono::duration_cast<std::chrono::microseconds>(Steady::now() - attempts[i].start);
      ::close(fd);
    } else if (err != EINPROGRESS) {
      results[i].error = std::strerror(err);
      ::close(fd);
    } else {
      attempts[i].fd = fd;
    }
  }
  const auto deadline = Steady::now() + timeout;
  for (;;) {
    std::vector<pollfd> fds;
    std::vector<size_t> index;
    for (size_t i = 0; i < attempts.size(); ++i)
      if (attempts[i].fd >= 0) {
        fds.push_back({attempts[i].fd, POLLOUT, 0});
        index.push_back(i);
      }
    if (fds.empty()) break;
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Steady::now());
    if (left.count() <= 0) break;
    int n = ::poll(fds.data(), fds.size(), static_cast<int>(left.count()));
    if (n < 0 && errno != EINTR) break;
    const auto now = Steady::now();
    for (size_t k = 0; k < fds.size() && n > 0; ++k) {
      if (fds[k].revents == 0) continue;
      Attempt& a = attempts[index[k]];
      int so_error = 0;
      socklen_t len = sizeof so_error;
      if (::getsockopt(a.fd, SOL_SOCKET, SO_ERROR, &so_error, &len) != 0) so_error = errno;
      if (so_error == 0)
        results[index[k]].latency =
            std::chrono::duration_cast<std::chrono::microseconds>(now - a.start);
      else
        results[index[k]].error = std::strerror(so_error);
      ::close(a.fd);
      a.fd = -1;
    }
  }
  for (size_t i = 0; i < attempts.size(); ++i)
    if (attempts[i].fd >= 0) {
      ::close(attempts[i].fd);
      results[i].error = "timed out after " + std::to_string(timeout.count()) + " ms";
    }
  return results;
}

}  // namespace gpud::host
