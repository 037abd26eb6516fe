#include "host/systemd_bus.h"

#include <dlfcn.h>
#include <systemd/sd-bus.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <type_traits>

#include "core/strings.h"
#include "core/time_util.h"
#include "host/command.h"

namespace gpud::host {

namespace {

constexpr const char* kSystemdService = "org.freedesktop.systemd1";
constexpr const char* kUnitInterface = "org.freedesktop.systemd1.Unit";
constexpr const char* kServiceInterface = "org.freedesktop.systemd1.Service";

// libsystemd's sd-bus, dlopen()ed the first time systemd is asked over D-Bus: a node whose systemd
// answers through systemctl, or that has none, never maps it (about 0.8 MiB resident with its
// compression and crypto libraries).
struct SdBus {
  decltype(&::sd_bus_new) bus_new = nullptr;
  decltype(&::sd_bus_set_address) set_address = nullptr;
  decltype(&::sd_bus_set_bus_client) set_bus_client = nullptr;
  decltype(&::sd_bus_start) start = nullptr;
  decltype(&::sd_bus_is_ready) is_ready = nullptr;
  decltype(&::sd_bus_is_open) is_open = nullptr;
  decltype(&::sd_bus_process) process = nullptr;
  decltype(&::sd_bus_wait) wait = nullptr;
  decltype(&::sd_bus_close_unref) close_unref = nullptr;
  decltype(&::sd_bus_set_method_call_timeout) set_method_call_timeout = nullptr;
  decltype(&::sd_bus_call_method) call_method = nullptr;
  decltype(&::sd_bus_path_encode) path_encode = nullptr;
  decltype(&::sd_bus_get_property_string) get_property_string = nullptr;
  decltype(&::sd_bus_get_property_trivial) get_property_trivial = nullptr;
  decltype(&::sd_bus_error_free) error_free = nullptr;
  decltype(&::sd_bus_error_is_set) error_is_set = nullptr;
  decltype(&::sd_bus_error_has_name) error_has_name = nullptr;
  std::string error;  // why it could not be loaded; "" when loaded
};

const SdBus& sd_bus_library() {
  static const SdBus lib = [] {
    SdBus l;
    void* h = ::dlopen("libsystemd.so.0", RTLD_NOW | RTLD_LOCAL);
    if (h == nullptr) {
      const char* e = ::dlerror();
      l.error = std::string("cannot load libsystemd.so.0 (sd-bus): ") + (e ? e : "dlopen failed");
      return l;
    }
    auto sym = [&](auto& fn, const char* name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(::dlsym(h, name));
      if (fn == nullptr && l.error.empty()) l.error = std::string("libsystemd.so.0 has no ") + name;
    };
    sym(l.bus_new, "sd_bus_new");
    sym(l.set_address, "sd_bus_set_address");
    sym(l.set_bus_client, "sd_bus_set_bus_client");
    sym(l.start, "sd_bus_start");
    sym(l.is_ready, "sd_bus_is_ready");
    sym(l.is_open, "sd_bus_is_open");
    sym(l.process, "sd_bus_process");
    sym(l.wait, "sd_bus_wait");
    sym(l.close_unref, "sd_bus_close_unref");
    sym(l.set_method_call_timeout, "sd_bus_set_method_call_timeout");
    sym(l.call_method, "sd_bus_call_method");
    sym(l.path_encode, "sd_bus_path_encode");
    sym(l.get_property_string, "sd_bus_get_property_string");
    sym(l.get_property_trivial, "sd_bus_get_property_trivial");
    sym(l.error_free, "sd_bus_error_free");
    sym(l.error_is_set, "sd_bus_error_is_set");
    sym(l.error_has_name, "sd_bus_error_has_name");
    return l;  // the handle stays open for the process's life
  }();
  return lib;
}

struct BusCloser {
  void operator()(sd_bus* b) const { sd_bus_library().close_unref(b); }
};
using BusPtr = std::unique_ptr<sd_bus, BusCloser>;

// sd_bus_error, freed on scope exit.
struct BusError {
  const SdBus& lib;
  sd_bus_error e = SD_BUS_ERROR_NULL;
  explicit BusError(const SdBus& l) : lib(l) {}
  BusError(const BusError&) = delete;
  BusError& operator=(const BusError&) = delete;
  ~BusError() { lib.error_free(&e); }
  std::string message(int r) const {
    if (lib.error_is_set(&e) && e.message != nullptr && *e.message != '\0') return e.message;
    if (lib.error_is_set(&e) && e.name != nullptr) return e.name;
    return std::strerror(-r);
  }
};

struct Deadline {
  std::chrono::steady_clock::time_point at;
  // The time left, set as the bus's method-call timeout; false when none is left.
  bool arm(const SdBus& lib, sd_bus* bus) const {
    auto left = std::chrono::duration_cast<std::chrono::microseconds>(
        at - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    return lib.set_method_call_timeout(bus, static_cast<uint64_t>(left.count())) >= 0;
  }
};

std::string timed_out(std::chrono::milliseconds timeout) {
  return "systemd did not answer within " + std::to_string(timeout.count()) + " ms";
}

// One string property; "" with `error` set when it cannot be read.
std::string string_property(const SdBus& lib, sd_bus* bus, const char* path, const char* iface,
                            const char* name, std::string* error) {
  BusError err(lib);
  char* value = nullptr;
  int r = lib.get_property_string(bus, kSystemdService, path, iface, name, &err.e, &value);
  if (r < 0) {
    *error = std::string(name) + ": " + err.message(r);
    return "";
  }
  std::string out(value != nullptr ? value : "");
  std::free(value);
  return out;
}

}  // namespace

std::string unix_bus_address(std::string_view socket_path) {
  std::string out = "unix:path=";
  static constexpr char kHex[] = "0123456789abcdef";
  for (unsigned char c : socket_path) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '/' || c == '.' || c == '\\' || c == '*') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 0xf];
    }
  }
  return out;
}

SystemdAnswer systemd_bus_show(const std::string& socket_path, bool bus_client,
                               const std::vector<std::string>& units,
                               std::chrono::milliseconds timeout) {
  SystemdAnswer answer;
  answer.via = socket_path;
  const Deadline deadline{std::chrono::steady_clock::now() + timeout};
  const SdBus& lib = sd_bus_library();
  if (!lib.error.empty()) {
    answer.units = make_error(lib.error);
    return answer;
  }

  sd_bus* raw = nullptr;
  if (int r = lib.bus_new(&raw); r < 0) {
    answer.units = make_error(std::string("sd_bus_new: ") + std::strerror(-r));
    return answer;
  }
  BusPtr bus(raw);
  const std::string address = unix_bus_address(socket_path);
  int r = lib.set_address(bus.get(), address.c_str());
  if (r >= 0) r = lib.set_bus_client(bus.get(), bus_client ? 1 : 0);
  if (r >= 0) r = lib.start(bus.get());
  if (r < 0) {
    answer.units = make_error(socket_path + ": cannot connect: " + std::strerror(-r));
    return answer;
  }

  // The authentication (and on a bus, Hello) under our deadline: sd-bus would wait its own, far
  // longer, one for a peer that accepts the connection and never speaks.
  while ((r = lib.is_ready(bus.get())) == 0) {
    const auto left = std::chrono::duration_cast<std::chrono::microseconds>(
        deadline.at - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      answer.reached = true;  // something accepted and never answered: a hung systemd or bus
      answer.units = make_error(socket_path + ": " + timed_out(timeout));
      return answer;
    }
    r = lib.process(bus.get(), nullptr);
    if (r >= 0 && lib.is_open(bus.get()) <= 0) r = -ECONNRESET;
    if (r == 0) r = lib.wait(bus.get(), static_cast<uint64_t>(left.count()));
    if (r < 0) break;
  }
  if (r < 0) {
    answer.units =
        make_error(socket_path + ": connection refused or dropped: " + std::strerror(-r));
    return answer;
  }

  // Reached: systemd answered a ping (through the bus, when it is one).
  {
    BusError err(lib);
    if (!deadline.arm(lib, bus.get())) {
      answer.units = make_error(timed_out(timeout));
      return answer;
    }
    r = lib.call_method(bus.get(), kSystemdService, "/org/freedesktop/systemd1",
                        "org.freedesktop.DBus.Peer", "Ping", &err.e, nullptr, nullptr);
    if (r == -ETIMEDOUT) {
      answer.reached = true;
      answer.units = make_error(socket_path + ": " + timed_out(timeout));
      return answer;
    }
    if (r < 0) {
      answer.units = make_error(socket_path + ": no answer from systemd: " + err.message(r));
      return answer;
    }
  }
  answer.reached = true;

  std::vector<UnitState> out;
  for (const std::string& unit : units) {
    UnitState s;
    s.id = unit;
    char* path = nullptr;
    if (lib.path_encode("/org/freedesktop/systemd1/unit", unit.c_str(), &path) < 0) {
      s.error = "cannot encode its object path";
      out.push_back(std::move(s));
      continue;
    }
    std::unique_ptr<char, decltype(&std::free)> path_owner(path, &std::free);
    std::vector<std::string> errors;
    auto read_string = [&](const char* iface, const char* name) -> std::string {
      std::string error;
      if (!deadline.arm(lib, bus.get())) {
        errors.push_back(std::string(name) + ": " + timed_out(timeout));
        return "";
      }
      std::string v = string_property(lib, bus.get(), path, iface, name, &error);
      if (!error.empty()) errors.push_back(std::move(error));
      return v;
    };
    std::string id = read_string(kUnitInterface, "Id");
    if (!id.empty() && id != unit) errors.push_back("systemd answered for " + id);
    s.load_state = read_string(kUnitInterface, "LoadState");
    s.active_state = read_string(kUnitInterface, "ActiveState");
    s.sub_state = read_string(kUnitInterface, "SubState");
    if (deadline.arm(lib, bus.get())) {
      BusError err(lib);
      uint64_t usec = 0;
      r = lib.get_property_trivial(bus.get(), kSystemdService, path, kUnitInterface,
                                   "StateChangeTimestamp", &err.e, 't', &usec);
      if (r < 0)
        errors.push_back("StateChangeTimestamp: " + err.message(r));
      else if (usec != 0)
        s.state_changed = format_rfc3339(TimePoint(
            std::chrono::duration_cast<Clock::duration>(std::chrono::microseconds(usec))));
    } else {
      errors.push_back("StateChangeTimestamp: " + timed_out(timeout));
    }
    if (unit.ends_with(".service") && deadline.arm(lib, bus.get())) {
      BusError err(lib);
      uint32_t n = 0;
      r = lib.get_property_trivial(bus.get(), kSystemdService, path, kServiceInterface, "NRestarts",
                                   &err.e, 'u', &n);
      // systemd before 235 has no NRestarts: absent, as systemctl shows it.
      if (r >= 0)
        s.n_restarts = n;
      else if (!lib.error_has_name(&err.e, SD_BUS_ERROR_UNKNOWN_PROPERTY))
        errors.push_back("NRestarts: " + err.message(r));
    }
    if (s.load_state.empty() && errors.empty()) errors.push_back("no LoadState");
    if (s.active_state.empty() && errors.empty()) errors.push_back("no ActiveState");
    s.error = join(errors, ", ");
    out.push_back(std::move(s));
  }
  answer.units = std::move(out);
  return answer;
}

SystemdAnswer host_systemd_show(const HostFs& fs, const std::vector<std::string>& units,
                                std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::vector<std::string> reasons;
  for (auto [socket, bus_client] :
       {std::pair{kSystemdPrivateSocket, false}, std::pair{kSystemBusSocket, true}}) {
    const std::string path = fs.path(socket);
    if (!fs.exists(socket)) {
      reasons.push_back(path + " does not exist");
      continue;
    }
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    SystemdAnswer a = systemd_bus_show(path, bus_client, units, left);
    if (a.reached) return a;
    reasons.push_back(a.units.error().message);
  }
  SystemdAnswer none;
  none.units = make_error(join(reasons, "; "));
  return none;
}

namespace {

// `systemctl show`, reached unless it is missing or cannot connect to systemd.
SystemdAnswer systemctl_answer(const std::string& systemctl, std::string_view search_path,
                               const std::vector<std::string>& units,
                               std::chrono::milliseconds timeout) {
  SystemdAnswer a;
  a.via = "systemctl";
  if (!find_executable(systemctl, search_path)) {
    a.units = make_error(systemctl + " not found on the search path");
    return a;
  }
  a.units = systemctl_show(systemctl, search_path, units, timeout);
  a.reached = true;
  if (!a.units) {
    const std::string& e = a.units.error().message;
    a.reached = e.find("Failed to connect to bus") == std::string::npos &&
                e.find("has not been booted with systemd") == std::string::npos;
  }
  return a;
}

}  // namespace

SystemdAnswer ask_systemd(const HostFs& fs, const std::string& systemctl,
                          std::string_view search_path, const std::vector<std::string>& units,
                          std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  auto left = [&] {
    return std::max(std::chrono::duration_cast<std::chrono::milliseconds>(
                        deadline - std::chrono::steady_clock::now()),
                    timeout / 2);
  };
  std::vector<std::string> names;
  for (const auto& u : units) names.push_back(unit_name(u));
  // On the host itself systemctl asks the right systemd and costs no library; under another root
  // (a container) the root's sockets reach the host's, and a systemctl would ask the container's.
  const bool on_host = fs.path("/") == "/";
  SystemdAnswer first = on_host ? systemctl_answer(systemctl, search_path, units, timeout)
                                : host_systemd_show(fs, names, timeout);
  if (first.reached) return first;
  SystemdAnswer second = on_host ? host_systemd_show(fs, names, left())
                                 : systemctl_answer(systemctl, search_path, units, left());
  if (second.reached) return second;
  second.units = make_error(first.units.error().message + "; " + second.units.error().message);
  return second;
}

std::optional<Result<UnitState>> host_unit_state(const HostFs& fs, const std::string& systemctl,
                                                 std::string_view search_path,
                                                 const std::string& unit,
                                                 std::chrono::milliseconds timeout) {
  if (!systemd_running(fs)) return std::nullopt;
  SystemdAnswer a = ask_systemd(fs, systemctl, search_path, {unit}, timeout);
  if (!a.reached) return std::nullopt;
  if (!a.units) return Result<UnitState>(a.units.error());
  return Result<UnitState>(a.units->front());
}

}  // namespace gpud::host
