#include "host/pci.h"

#include <algorithm>
#include <cctype>
#include <filesystem>

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

std::string pci_driver(const HostFs& fs, std::string_view address) {
  std::error_code ec;
  auto target = std::filesystem::read_symlink(
      fs.path("/sys/bus/pci/devices/" + std::string(address) + "/driver"), ec);
  return ec ? "" : target.filename().string();
}

namespace {

uint32_t le32(std::string_view b, size_t at) {
  auto u = [&](size_t i) { return static_cast<uint32_t>(static_cast<unsigned char>(b[at + i])); };
  return u(0) | (u(1) << 8) | (u(2) << 16) | (u(3) << 24);
}

}  // namespace

std::optional<uint16_t> acs_control(std::string_view config) {
  constexpr uint16_t kAcsCapabilityId = 0x000d;
  size_t at = 0x100;
  // At most 4096 / 4 headers: a list that loops is cut, not followed forever.
  for (int hops = 0; hops < 1024 && at + 4 <= config.size(); ++hops) {
    uint32_t header = le32(config, at);
    if (header == 0 || header == 0xffffffffU) return std::nullopt;
    if ((header & 0xffffU) == kAcsCapabilityId) {
      if (at + 8 > config.size()) return std::nullopt;
      return static_cast<uint16_t>(le32(config, at + 4) >> 16);
    }
    size_t next = (header >> 20) & 0xffcU;
    if (next < 0x100 || next <= at) return std::nullopt;  // the list only goes forward
    at = next;
  }
  return std::nullopt;
}

AcsScan scan_acs_source_validation(const HostFs& fs) {
  AcsScan scan;
  auto bridges = find_pci_devices(
      fs, [](std::string_view, std::string_view cls) { return lower(cls).starts_with("0x0604"); });
  for (const std::string& dev : bridges) {
    ++scan.bridges;
    auto config = fs.read("/sys/bus/pci/devices/" + dev + "/config", 4096);
    if (!config) {
      ++scan.unreadable;
      continue;
    }
    if (auto control = acs_control(*config); control && (*control & kAcsSourceValidation) != 0)
      scan.source_validation.push_back(dev);
  }
  return scan;
}

std::string virtualization(const HostFs& fs) {
  auto cpuinfo = fs.read("/proc/cpuinfo", 4 << 20);
  if (!cpuinfo) return "";
  // x86 tells a guest by its CPU flags; arm64's cpuinfo has no "flags" line (its "Features" have
  // no such bit), so there a VM is one whose DMI names a hypervisor or whose device tree has a
  // hypervisor node (as systemd-detect-virt decides off x86).
  bool x86_flags = false, hypervisor = false;
  for (std::string_view line : split_lines(*cpuinfo)) {
    if (!line.starts_with("flags")) continue;
    x86_flags = true;
    for (std::string_view f : split_fields(line))
      if (f == "hypervisor") hypervisor = true;
    break;  // every CPU has the same flags
  }
  if (x86_flags && !hypervisor) return "none";
  const std::string product = lower(fs.read_line("/sys/class/dmi/id/product_name").value_or(""));
  std::string dmi =
      lower(fs.read_line("/sys/class/dmi/id/sys_vendor").value_or("")) + " " + product;
  static constexpr std::pair<std::string_view, std::string_view> kKnown[] = {
      {"kvm", "kvm"}, {"qemu", "qemu"},         {"vmware", "vmware"}, {"microsoft", "microsoft"},
      {"xen", "xen"}, {"amazon ec2", "amazon"}, {"google", "google"}, {"oracle", "oracle"}};
  for (const auto& [needle, name] : kKnown) {
    if (dmi.find(needle) == std::string::npos) continue;
    // EC2's bare-metal instances (c7g.metal, ...) carry the same vendor as its VMs.
    if (!x86_flags && name == "amazon" && product.ends_with(".metal")) return "none";
    return std::string(name);
  }
  if (!x86_flags) return fs.exists("/proc/device-tree/hypervisor") ? "vm" : "none";
  return "vm";
}

}  // namespace gpud::host
