#include "app/sd_notify.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <filesystem>

namespace gpud::app {
namespace {

// A bound unix datagram socket standing in for systemd's notification socket.
class NotifySocket {
 public:
  // `name` starting with '@' binds in the abstract namespace.
  explicit NotifySocket(const std::string& name) : name_(name) {
    fd_ = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::memcpy(addr.sun_path, name.data(), name.size());
    if (name[0] == '@') addr.sun_path[0] = '\0';
    auto len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + name.size() +
                                      (name[0] == '@' ? 0 : 1));
    bound_ = ::bind(fd_, reinterpret_cast<sockaddr*>(&addr), len) == 0;
  }
  ~NotifySocket() {
    ::close(fd_);
    if (name_[0] == '/') ::unlink(name_.c_str());
  }
  bool bound() const { return bound_; }
  std::string receive(int timeout_ms = 2000) {
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, timeout_ms) != 1) return "";
    char buf[512];
    ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
    return n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
  }

 private:
  std::string name_;
  int fd_ = -1;
  bool bound_ = false;
};

class SdNotifyTest : public ::testing::Test {
 protected:
  void TearDown() override { ::unsetenv("NOTIFY_SOCKET"); }
};

TEST_F(SdNotifyTest, WithoutNotifySocketNothingIsSent) {
  ::unsetenv("NOTIFY_SOCKET");
  auto r = sd_notify("READY=1");
  ASSERT_TRUE(r);
  EXPECT_FALSE(*r);
}

TEST_F(SdNotifyTest, SendsToAPathSocket) {
  std::string path = (std::filesystem::temp_directory_path() /
                      ("gpud-notify-" + std::to_string(::getpid()) + ".sock"))
                         .string();
  NotifySocket sock(path);
  ASSERT_TRUE(sock.bound());
  ::setenv("NOTIFY_SOCKET", path.c_str(), 1);
  auto r = sd_notify("READY=1\nSTATUS=serving");
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_TRUE(*r);
  EXPECT_EQ(sock.receive(), "READY=1\nSTATUS=serving");
}

TEST_F(SdNotifyTest, SendsToAnAbstractSocket) {
  std::string name = "@gpud-notify-test-" + std::to_string(::getpid());
  NotifySocket sock(name);
  ASSERT_TRUE(sock.bound());
  ::setenv("NOTIFY_SOCKET", name.c_str(), 1);
  auto r = sd_notify("STOPPING=1");
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(sock.receive(), "STOPPING=1");
}

TEST_F(SdNotifyTest, BadOrUnreachableSocketIsAnError) {
  ::setenv("NOTIFY_SOCKET", "relative/path", 1);
  EXPECT_FALSE(sd_notify("READY=1"));
  ::setenv("NOTIFY_SOCKET", "/nonexistent/gpud/notify.sock", 1);
  EXPECT_FALSE(sd_notify("READY=1"));
  ::setenv("NOTIFY_SOCKET", ("/" + std::string(200, 'x')).c_str(), 1);
  EXPECT_FALSE(sd_notify("READY=1"));
}

}  // namespace
}  // namespace gpud::app
