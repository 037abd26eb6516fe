#include "host/infiniband.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <filesystem>
#include <system_error>

#include "core/parse_number.h"
#include "core/pci_address.h"

namespace gpud::host {
namespace {

// "0000:1a:00.0" (the domain may have more digits): what a PCI device's sysfs directory is named.
bool looks_like_bus_id(std::string_view s) {
  size_t colon = s.find(':');
  if (colon == std::string_view::npos || colon < 4) return false;
  std::string_view rest = s.substr(colon + 1);
  if (rest.size() != 7 || rest[2] != ':' || rest[5] != '.') return false;
  auto hex = [](std::string_view h) {
    return !h.empty() && std::all_of(h.begin(), h.end(), [](char c) {
      return std::isxdigit(static_cast<unsigned char>(c));
    });
  };
  return hex(s.substr(0, colon)) && hex(rest.substr(0, 2)) && hex(rest.substr(3, 2)) &&
         rest[6] >= '0' && rest[6] <= '7';
}

std::string shown_value(std::string_view s) {
  constexpr size_t kMax = 40;
  std::string out = "\"";
  for (char c : s.substr(0, kMax)) out += std::isprint(static_cast<unsigned char>(c)) ? c : '?';
  if (s.size() > kMax) out += "...";
  return out + "\"";
}

// Reads <dir>/<name>/* as unsigned counters into `out`; a value that does not parse is left out
// and named in `errors`. A missing directory is no error (older drivers have no hw_counters).
void read_counters(const HostFs& fs, const std::string& dir, std::string_view what,
                   std::map<std::string, uint64_t>& out, std::vector<std::string>& errors) {
  auto names = fs.list(dir);
  if (!names) return;
  std::sort(names->begin(), names->end());
  for (const std::string& name : *names) {
    auto text = fs.read_line(dir + "/" + name);
    if (!text) {
      // Some hw_counters refuse reads on restricted functions (EINVAL/EACCES): absent, noted.
      errors.push_back(std::string(what) + "/" + name + ": " + text.error().message);
      continue;
    }
    auto v = parse_integer<uint64_t>(*text);
    if (!v) {
      errors.push_back(std::string(what) + "/" + name + ": cannot parse " + shown_value(*text));
      continue;
    }
    out[name] = *v;
  }
}

InfinibandPort read_port(const HostFs& fs, const std::string& dir, const std::string& device,
                         int port) {
  InfinibandPort p;
  p.device = device;
  p.port = port;
  auto text_of = [&](const char* file) -> std::optional<std::string> {
    auto t = fs.read_line(dir + "/" + file);
    if (!t) {
      p.errors.push_back(std::string(file) + ": " + t.error().message);
      return std::nullopt;
    }
    return std::string(*t);
  };
  if (auto t = text_of("state")) {
    p.state = parse_port_state(*t);
    if (!p.state) p.errors.push_back("state: cannot parse " + shown_value(*t));
  }
  if (auto t = text_of("phys_state")) {
    p.phys_state = parse_port_state(*t);
    if (!p.phys_state) p.errors.push_back("phys_state: cannot parse " + shown_value(*t));
  }
  if (auto t = text_of("rate")) {
    p.rate_gbps = parse_port_rate(*t);
    if (!p.rate_gbps) p.errors.push_back("rate: cannot parse " + shown_value(*t));
  }
  if (auto t = text_of("link_layer")) {
    if (!t->empty())
      p.link_layer = *t;
    else
      p.errors.push_back("link_layer: empty");
  }
  read_counters(fs, dir + "/counters", "counters", p.counters, p.errors);
  read_counters(fs, dir + "/hw_counters", "hw_counters", p.hw_counters, p.errors);
  return p;
}

}  // namespace

std::optional<uint64_t> InfinibandPort::counter(std::string_view name) const {
  auto it = counters.find(std::string(name));
  if (it == counters.end()) return std::nullopt;
  return it->second;
}

std::optional<std::string> parse_port_state(std::string_view text) {
  text = trim(text);
  size_t colon = text.find(':');
  if (colon != std::string_view::npos) {
    if (!parse_integer<int>(trim(text.substr(0, colon)))) return std::nullopt;
    text = trim(text.substr(colon + 1));
  }
  if (text.empty()) return std::nullopt;
  if (!std::all_of(text.begin(), text.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == ' ';
      }))
    return std::nullopt;
  return std::string(text);
}

std::optional<double> parse_port_rate(std::string_view text) {
  text = trim(text);
  size_t space = text.find(' ');
  if (space == std::string_view::npos) return std::nullopt;
  std::string_view number = text.substr(0, space);
  if (!trim(text.substr(space)).starts_with("Gb/sec")) return std::nullopt;
  double v = 0;
  const auto [end, ec] = std::from_chars(number.data(), number.data() + number.size(), v);
  if (ec != std::errc() || end != number.data() + number.size() || !(v >= 0) || v > 1e6)
    return std::nullopt;
  return v;
}

std::vector<std::string> pci_path_of(std::string_view resolved_path) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= resolved_path.size()) {
    size_t slash = resolved_path.find('/', start);
    if (slash == std::string_view::npos) slash = resolved_path.size();
    std::string_view part = resolved_path.substr(start, slash - start);
    if (looks_like_bus_id(part)) out.push_back(normalize_pci_bus_id(part));
    start = slash + 1;
  }
  return out;
}

namespace {

std::vector<std::string> resolved_pci_path(const std::string& link) {
  std::error_code ec;
  auto resolved = std::filesystem::canonical(link, ec);
  if (ec) return {};
  return pci_path_of(resolved.string());
}

}  // namespace

std::vector<std::string> pci_path_of_device(const HostFs& fs, const std::string& bus_id) {
  return resolved_pci_path(fs.path("/sys/bus/pci/devices/" + bus_id));
}

size_t shared_bridges(const std::vector<std::string>& a, const std::vector<std::string>& b) {
  size_t n = 0;
  // The last element of each is the device itself, never a shared bridge.
  while (n + 1 < a.size() && n + 1 < b.size() && a[n] == b[n]) ++n;
  return n;
}

Result<InfinibandSnapshot> read_infiniband(const std::string& class_dir,
                                           const std::vector<std::string>& excluded) {
  InfinibandSnapshot s;
  const HostFs fs("/");
  std::error_code ec;
  if (!std::filesystem::exists(class_dir, ec)) return s;
  s.class_dir_present = true;
  auto names = fs.list(class_dir);
  if (!names) return make_error("cannot list " + class_dir + ": " + names.error().message);
  std::sort(names->begin(), names->end());
  for (const std::string& name : *names) {
    if (std::find(excluded.begin(), excluded.end(), name) != excluded.end()) continue;
    const std::string dir = class_dir + "/" + name;
    InfinibandDevice dev;
    dev.name = name;
    dev.pci_path = resolved_pci_path(dir + "/device");
    if (!dev.pci_path.empty()) dev.pci_bus_id = dev.pci_path.back();
    s.devices.push_back(std::move(dev));
    auto ports = fs.list(dir + "/ports");
    if (!ports) {
      s.errors.push_back(name + ": cannot list ports: " + ports.error().message);
      continue;
    }
    std::vector<int> numbers;
    for (const std::string& p : *ports) {
      auto n = parse_integer<int>(p);
      if (n && *n > 0) numbers.push_back(*n);
    }
    std::sort(numbers.begin(), numbers.end());
    for (int n : numbers)
      s.ports.push_back(read_port(fs, dir + "/ports/" + std::to_string(n), name, n));
  }
  return s;
}

}  // namespace gpud::host
