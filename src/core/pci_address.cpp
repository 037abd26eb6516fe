#include "core/pci_address.h"

#include <cctype>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <vector>

#include "core/parse_number.h"

namespace gpud {

namespace {

struct PciAddress {
  uint32_t domain, bus, device, function;
};

// The address `s` (lower-cased) names, if it is one.
std::optional<PciAddress> parse_pci_address(std::string_view s) {
  if (s.substr(0, 4) == "pci:") s.remove_prefix(4);
  std::string_view fn = "0";
  if (auto dot = s.rfind('.'); dot != std::string_view::npos) {
    fn = s.substr(dot + 1);
    s = s.substr(0, dot);
  }
  std::vector<std::string_view> parts;
  for (size_t start = 0;;) {
    const size_t c = s.find(':', start);
    parts.push_back(
        s.substr(start, c == std::string_view::npos ? std::string_view::npos : c - start));
    if (c == std::string_view::npos) break;
    start = c + 1;
  }
  if (parts.size() == 2) parts.insert(parts.begin(), "0");
  if (parts.size() != 3 || parts[0].size() > 8 || parts[1].size() > 2 || parts[2].size() > 2 ||
      fn.size() != 1)
    return std::nullopt;
  const auto domain = parse_integer<uint32_t>(parts[0], 16);
  const auto bus = parse_integer<uint32_t>(parts[1], 16);
  const auto dev = parse_integer<uint32_t>(parts[2], 16);
  const auto func = parse_integer<uint32_t>(fn, 16);
  // parse_integer accepts a "0x" prefix for base 16; a PCI field never has one.
  const bool prefixed = parts[0].find('x') != std::string_view::npos ||
                        parts[1].find('x') != std::string_view::npos ||
                        parts[2].find('x') != std::string_view::npos;
  if (!domain || !bus || !dev || !func || prefixed) return std::nullopt;
  return PciAddress{*domain, *bus, *dev, *func};
}

std::string lower_case(std::string_view id) {
  std::string lower;
  for (char c : id) {
    if (c == '\0') break;  // NVML's fixed-size buffers
    lower.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  }
  return lower;
}

// `id` in sysfs's form or NVML's, or lower-cased when it is no PCI address.
std::string write_pci_address(std::string_view id, bool nvml_form) {
  std::string lower = lower_case(id);
  auto a = parse_pci_address(lower);
  if (!a) return lower;
  char buf[32];
  if (nvml_form)
    std::snprintf(buf, sizeof buf, "%08X:%02X:%02X.%X", a->domain, a->bus, a->device, a->function);
  else
    std::snprintf(buf, sizeof buf, "%04x:%02x:%02x.%x", a->domain, a->bus, a->device, a->function);
  return buf;
}

}  // namespace

std::string normalize_pci_bus_id(std::string_view id) { return write_pci_address(id, false); }

std::string nvml_pci_bus_id(std::string_view id) { return write_pci_address(id, true); }

}  // namespace gpud
