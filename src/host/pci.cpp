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

std::vector<std::string> find_nvidia_gpus(const HostFs& fs) {
  std::vector<std::string> out;
  auto devices = fs.list("/sys/bus/pci/devices");
  if (!devices) return out;
  for (const std::string& dev : *devices) {
    std::string base = "/sys/bus/pci/devices/" + dev;
    auto vendor = fs.read_line(base + "/vendor");
    if (!vendor) continue;
    auto cls = fs.read_line(base + "/class");
    if (!cls) continue;
    if (is_nvidia_gpu(*vendor, *cls)) out.push_back(dev);
  }
  std::sort(out.begin(), out.end());
  return out;
}

bool nvidia_gpu_present(const HostFs& fs) { return !find_nvidia_gpus(fs).empty(); }

}  // namespace gpud::host
