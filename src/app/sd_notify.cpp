#include "app/sd_notify.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdlib>
#include <cstring>

namespace gpud::app {

// Hand-rolled instead of linking libsystemd: systemd documents the protocol as a stable interface
// meant to be reimplemented, and this keeps the binary free of a libsystemd dependency.
Result<bool> sd_notify(const std::string& state) {
  const char* env = std::getenv("NOTIFY_SOCKET");
  if (env == nullptr || *env == '\0') return false;
  std::string path(env);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path[0] != '/' && path[0] != '@')
    return make_error("NOTIFY_SOCKET \"" + path + "\" is neither an absolute path nor '@abstract'");
  if (path.size() >= sizeof addr.sun_path)
    return make_error("NOTIFY_SOCKET \"" + path + "\" is too long");
  std::memcpy(addr.sun_path, path.data(), path.size());
  if (path[0] == '@') addr.sun_path[0] = '\0';  // abstract namespace: no trailing NUL counted
  auto len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + path.size() +
                                    (path[0] == '@' ? 0 : 1));
  int fd = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return make_error(std::string("NOTIFY_SOCKET: socket: ") + std::strerror(errno));
  ssize_t sent = ::sendto(fd, state.data(), state.size(), MSG_NOSIGNAL,
                          reinterpret_cast<const sockaddr*>(&addr), len);
  int err = errno;
  ::close(fd);
  if (sent < 0) return make_error("NOTIFY_SOCKET " + path + ": sendto: " + std::strerror(err));
  return true;
}

}  // namespace gpud::app
