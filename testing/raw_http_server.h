// Test helper: HTTP servers on 127.0.0.1 written with raw sockets, for clients that must survive
// hostile peers: an answer sent in slices with pauses (a trickle), a large body whose sent bytes
// are counted, and the same server run by a forked child as uid 65534 (an unprivileged impostor
// on a port root's service should hold).
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <thread>

namespace gpud::testing {

// A listening socket on 127.0.0.1 (an ephemeral port); -1 on failure.
inline int listen_loopback(int* port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      listen(fd, 16) != 0 || getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0)
    return -1;
  *port = ntohs(addr.sin_port);
  return fd;
}

// What a raw server answers each connection, after reading its request head: `bytes`, `chunk`
// bytes at a time with `pause` between them.
struct RawAnswer {
  std::string_view bytes;
  size_t chunk = 64 << 10;
  std::chrono::milliseconds pause{0};
};

// Serves `answer` on `listen_fd` until `stop` (when given) is set, with system calls only and no
// allocation, so that a forked child can run it too. What each connection sent is copied to
// `report_fd` (when >= 0); the bytes sent are added to `sent` (when given).
inline void serve_raw(int listen_fd, const RawAnswer& answer, const std::atomic<bool>* stop,
                      int report_fd, std::atomic<size_t>* sent) {
  while (stop == nullptr || !stop->load()) {
    pollfd p{listen_fd, POLLIN, 0};
    if (poll(&p, 1, 100) <= 0) continue;
    const int conn = accept(listen_fd, nullptr, nullptr);
    if (conn < 0) continue;
    char buf[4096];
    size_t have = 0;
    // The request head (it ends with an empty line), or whatever came before the client closed.
    for (;;) {
      pollfd c{conn, POLLIN, 0};
      if (poll(&c, 1, 3000) <= 0) break;
      const ssize_t n = recv(conn, buf + have, sizeof(buf) - have, 0);
      if (n <= 0) break;
      if (report_fd >= 0) (void)!write(report_fd, buf + have, static_cast<size_t>(n));
      have += static_cast<size_t>(n);
      if (have == sizeof(buf) || memmem(buf, have, "\r\n\r\n", 4) != nullptr) break;
    }
    for (size_t at = 0; at < answer.bytes.size() && (stop == nullptr || !stop->load());) {
      const size_t n = std::min(answer.chunk, answer.bytes.size() - at);
      const ssize_t w = send(conn, answer.bytes.data() + at, n, MSG_NOSIGNAL);
      if (w <= 0) break;
      at += static_cast<size_t>(w);
      if (sent != nullptr) sent->fetch_add(static_cast<size_t>(w));
      if (answer.pause.count() > 0) std::this_thread::sleep_for(answer.pause);
    }
    close(conn);
  }
}

// serve_raw on a thread of this process (root's socket).
class RawServer {
 public:
  explicit RawServer(RawAnswer answer) : answer_(answer) {
    fd_ = listen_loopback(&port_);
    EXPECT_GE(fd_, 0);
    thread_ = std::thread([this] { serve_raw(fd_, answer_, &stop_, -1, &sent_); });
  }
  ~RawServer() {
    stop_ = true;
    thread_.join();
    close(fd_);
  }
  int port() const { return port_; }
  size_t sent() const { return sent_.load(); }

 private:
  RawAnswer answer_;
  int fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<size_t> sent_{0};
  std::thread thread_;
};

// serve_raw in a forked child running as uid and gid 65534 (nobody) that creates its socket after
// dropping root: an unprivileged user listening on the kubelet's port. What it received comes
// back through received().
class ImpostorServer {
 public:
  explicit ImpostorServer(const RawAnswer& answer) {
    int port_pipe[2], report_pipe[2];
    EXPECT_EQ(pipe2(port_pipe, O_CLOEXEC), 0);
    EXPECT_EQ(pipe2(report_pipe, O_CLOEXEC), 0);
    pid_ = fork();
    if (pid_ == 0) {
      int port = 0;
      if (setgroups(0, nullptr) != 0 || setgid(65534) != 0 || setuid(65534) != 0) _exit(1);
      const int fd = listen_loopback(&port);
      if (fd < 0) _exit(2);
      (void)!write(port_pipe[1], &port, sizeof(port));
      serve_raw(fd, answer, nullptr, report_pipe[1], nullptr);
      _exit(0);
    }
    close(port_pipe[1]);
    close(report_pipe[1]);
    report_fd_ = report_pipe[0];
    fcntl(report_fd_, F_SETFL, O_NONBLOCK);
    EXPECT_EQ(read(port_pipe[0], &port_, sizeof(port_)), static_cast<ssize_t>(sizeof(port_)));
    close(port_pipe[0]);
  }
  ~ImpostorServer() {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    close(report_fd_);
  }
  int port() const { return port_; }
  std::string received() {
    std::string out;
    char buf[4096];
    ssize_t n;
    while ((n = read(report_fd_, buf, sizeof(buf))) > 0) out.append(buf, static_cast<size_t>(n));
    return out;
  }

 private:
  pid_t pid_ = -1;
  int port_ = 0;
  int report_fd_ = -1;
};

// An HTTP 200 answer carrying `body` in chunks of 64 KiB, as the kubelet sends its pods.
inline std::string chunked_answer(const std::string& body) {
  std::string out =
      "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
      "Transfer-Encoding: chunked\r\n\r\n";
  for (size_t at = 0; at < body.size(); at += 64 << 10) {
    const size_t n = std::min<size_t>(64 << 10, body.size() - at);
    out += fmt::format("{:x}\r\n", n);
    out.append(body, at, n);
    out += "\r\n";
  }
  return out + "0\r\n\r\n";
}

// A PodList of copies of testing/fixtures/kubelet/pods.json's first pod (each with its own name and
// container ids) of at least `bytes`.
inline std::string pod_list_of_size(size_t bytes) {
  std::ifstream in(std::string(GPUD_SOURCE_DIR) + "/testing/fixtures/kubelet/pods.json");
  const nlohmann::json pod = nlohmann::json::parse(in)["items"][0];
  std::string out = "{\"kind\":\"PodList\",\"apiVersion\":\"v1\",\"items\":[";
  for (size_t i = 0; out.size() < bytes; ++i) {
    nlohmann::json p = pod;
    p["metadata"]["name"] = "pod-" + std::to_string(i);
    for (auto& c : p["status"]["containerStatuses"])
      c["containerID"] = fmt::format("containerd://{:064x}", i);
    out += (i == 0 ? "" : ",") + p.dump();
  }
  return out + "]}";
}

}  // namespace gpud::testing
