// FakeSystemdBus: a Unix socket at a given path that answers D-Bus like systemd (sd-bus server,
// org.freedesktop.systemd1.Unit and .Service properties of the units it is given; any other unit is
// "not-found"), optionally also as a message bus would (Hello), or not at all (hang). For the tests
// of reading the host's systemd through <host root>/run/systemd/private or the system bus socket.
#pragma once

#include <poll.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <systemd/sd-bus.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace gpud::testing_support {

// A temporary host root laid out as a systemd host seen from a container: run/systemd/system (the
// sign that systemd is PID 1, unless `systemd_pid1` is false), and empty run/systemd and run/dbus
// for the sockets a test puts there. Removed at scope exit.
struct SystemdHostRoot {
  explicit SystemdHostRoot(bool systemd_pid1 = true) {
    std::string tmpl = (std::filesystem::temp_directory_path() / "gpud-root-XXXXXX").string();
    if (::mkdtemp(tmpl.data()) != nullptr) dir = tmpl;
    std::filesystem::create_directories(dir + "/run/systemd");
    std::filesystem::create_directories(dir + "/run/dbus");
    if (systemd_pid1) std::filesystem::create_directories(dir + "/run/systemd/system");
  }
  ~SystemdHostRoot() {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
  SystemdHostRoot(const SystemdHostRoot&) = delete;
  SystemdHostRoot& operator=(const SystemdHostRoot&) = delete;
  std::string dir;
};

struct FakeUnit {
  std::string load_state = "loaded";
  std::string active_state = "active";
  std::string sub_state = "running";
  uint32_t n_restarts = 0;
  uint64_t state_change_usec = 0;
};

class FakeSystemdBus {
 public:
  enum class Mode { kSystemd, kMessageBus, kHang };

  FakeSystemdBus(std::string socket_path, std::map<std::string, FakeUnit> units,
                 Mode mode = Mode::kSystemd)
      : path_(std::move(socket_path)), units_(std::move(units)), mode_(mode) {
    ::unlink(path_.c_str());
    fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path_.c_str(), sizeof(addr.sun_path) - 1);
    if (fd_ < 0 || ::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
        ::listen(fd_, 8) != 0)
      return;
    ok_ = true;
    thread_ = std::thread([this] { serve(); });
  }
  ~FakeSystemdBus() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
    if (fd_ >= 0) ::close(fd_);
    ::unlink(path_.c_str());
  }
  FakeSystemdBus(const FakeSystemdBus&) = delete;
  FakeSystemdBus& operator=(const FakeSystemdBus&) = delete;

  bool ok() const { return ok_; }
  int connections() const { return connections_; }

 private:
  static const FakeUnit* find(FakeSystemdBus* self, const char* path, std::string* name) {
    char* decoded = nullptr;
    if (sd_bus_path_decode(path, "/org/freedesktop/systemd1/unit", &decoded) <= 0) return nullptr;
    *name = decoded;
    std::free(decoded);
    auto it = self->units_.find(*name);
    return it == self->units_.end() ? nullptr : &it->second;
  }
  static int get_string(sd_bus*, const char* path, const char*, const char* property,
                        sd_bus_message* reply, void* userdata, sd_bus_error*) {
    auto* self = static_cast<FakeSystemdBus*>(userdata);
    std::string name;
    const FakeUnit* u = find(self, path, &name);
    std::string p = property;
    std::string v;
    if (p == "Id")
      v = name;
    else if (p == "LoadState")
      v = u ? u->load_state : "not-found";
    else if (p == "ActiveState")
      v = u ? u->active_state : "inactive";
    else if (p == "SubState")
      v = u ? u->sub_state : "dead";
    return sd_bus_message_append(reply, "s", v.c_str());
  }
  static int get_timestamp(sd_bus*, const char* path, const char*, const char*,
                           sd_bus_message* reply, void* userdata, sd_bus_error*) {
    std::string name;
    const FakeUnit* u = find(static_cast<FakeSystemdBus*>(userdata), path, &name);
    return sd_bus_message_append(reply, "t", u ? u->state_change_usec : uint64_t{0});
  }
  static int get_restarts(sd_bus*, const char* path, const char*, const char*,
                          sd_bus_message* reply, void* userdata, sd_bus_error*) {
    std::string name;
    const FakeUnit* u = find(static_cast<FakeSystemdBus*>(userdata), path, &name);
    return sd_bus_message_append(reply, "u", u ? u->n_restarts : uint32_t{0});
  }
  static int hello(sd_bus_message* m, void*, sd_bus_error*) {
    return sd_bus_reply_method_return(m, "s", ":1.1");
  }

  void serve() {
    static const sd_bus_vtable kUnit[] = {
        SD_BUS_VTABLE_START(0),
        SD_BUS_PROPERTY("Id", "s", get_string, 0, 0),
        SD_BUS_PROPERTY("LoadState", "s", get_string, 0, 0),
        SD_BUS_PROPERTY("ActiveState", "s", get_string, 0, 0),
        SD_BUS_PROPERTY("SubState", "s", get_string, 0, 0),
        SD_BUS_PROPERTY("StateChangeTimestamp", "t", get_timestamp, 0, 0),
        SD_BUS_VTABLE_END};
    static const sd_bus_vtable kService[] = {SD_BUS_VTABLE_START(0),
                                             SD_BUS_PROPERTY("NRestarts", "u", get_restarts, 0, 0),
                                             SD_BUS_VTABLE_END};
    static const sd_bus_vtable kBus[] = {
        SD_BUS_VTABLE_START(0), SD_BUS_METHOD("Hello", "", "s", hello, 0), SD_BUS_VTABLE_END};
    std::vector<sd_bus*> buses;
    std::vector<int> hung;
    while (!stop_) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 20) > 0) {
        int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (c >= 0) {
          ++connections_;
          sd_bus* b = nullptr;
          sd_id128_t id{};
          id.bytes[0] = 1;
          if (mode_ == Mode::kHang || sd_bus_new(&b) < 0) {
            hung.push_back(c);
          } else {
            sd_bus_set_fd(b, c, c);
            sd_bus_set_server(b, 1, id);
            sd_bus_add_fallback_vtable(b, nullptr, "/org/freedesktop/systemd1/unit",
                                       "org.freedesktop.systemd1.Unit", kUnit, nullptr, this);
            sd_bus_add_fallback_vtable(b, nullptr, "/org/freedesktop/systemd1/unit",
                                       "org.freedesktop.systemd1.Service", kService, nullptr, this);
            if (mode_ == Mode::kMessageBus)
              sd_bus_add_object_vtable(b, nullptr, "/org/freedesktop/DBus", "org.freedesktop.DBus",
                                       kBus, this);
            sd_bus_start(b);
            buses.push_back(b);
          }
        }
      }
      for (sd_bus* b : buses)
        while (sd_bus_process(b, nullptr) > 0) {
        }
    }
    for (sd_bus* b : buses) sd_bus_close_unref(b);
    for (int c : hung) ::close(c);
  }

  std::string path_;
  std::map<std::string, FakeUnit> units_;
  Mode mode_;
  int fd_ = -1;
  bool ok_ = false;
  std::atomic<bool> stop_{false};
  std::atomic<int> connections_{0};
  std::thread thread_;
};

}  // namespace gpud::testing_support
