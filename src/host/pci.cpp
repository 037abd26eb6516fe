#include "host/pci.h"

#include <algorithm>
#include <cctype>

namespace gpud::host {
namespace {

std::string lower(std::string_view s) {
  std::string out(trim(s));
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

bool is_nvidia_gpu(std::string_view vendor, std::string_view pci_class) {
  if (lower(vendor) != "0x10de") return false;
  std::string cls = lower(pci_class);
  return cls.starts_with("0x0300") || cls.starts_with("0x0302");
}

namespace {

// The devices whose vendor and class `keep` accepts, sorted.
template <typename Keep>
std::vector<std::string> find_pci_devices(const HostFs& fs, Keep keep) {
  std::vector<std::string> out;
  auto devices = fs.list("/sys/bus/pci/devices");
  if (!devices) return out;
  for (const std::string& dev : *devices) {
    std::string base = "/sys/bus/pci/devices/" + dev;
    auto vendor = fs.read_line(base + "/vendor");
    if (!vendor) continue;
    auto cls = fs.read_line(base + "/class");
    if (!cls) continue;
    if (keep(*vendor, *cls)) out.push_back(dev);
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

std::vector<std::string> find_nvidia_gpus(const HostFs& fs) {
  return find_pci_devices(
      fs, [](std::string_view vendor, std::string_view cls) { return is_nvidia_gpu(vendor, cls); });
}

std::vector<std::string> find_nvidia_devices(const HostFs& fs) {
  return find_pci_devices(
      fs, [](std::string_view vendor, std::string_view) { return lower(vendor) == "0x10de"; });
}

bool nvidia_gpu_present(const HostFs& fs) { return !find_nvidia_gpus(fs).empty(); }

}  // namespace gpud::host
