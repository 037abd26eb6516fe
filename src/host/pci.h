// Pci: whether the host has an NVIDIA GPU, from sysfs (vendor 0x10de, class VGA 0x0300 or 3D
// 0x0302).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "host/host_fs.h"

namespace gpud::host {

// vendor and class as sysfs writes them ("0x10de", "0x030200").
bool is_nvidia_gpu(std::string_view vendor, std::string_view pci_class);
// PCI addresses ("0000:3b:00.0") of NVIDIA display controllers, sorted.
std::vector<std::string> find_nvidia_gpus(const HostFs& fs);
bool nvidia_gpu_present(const HostFs& fs);
// The kernel driver bound to a PCI device ("nvidia", "vfio-pci"): the name its sysfs `driver` link
// points to; "" when none is bound or the link cannot be read.
std::string pci_driver(const HostFs& fs, std::string_view address);
// PCI addresses of every NVIDIA device (vendor 0x10de: GPUs, NVSwitches, bridges), sorted.
std::vector<std::string> find_nvidia_devices(const HostFs& fs);

// ACS (Access Control Services), read from a device's configuration space as sysfs gives it (the
// `config` file: 4096 bytes for a PCIe device when read as root, only the first 64 otherwise).
// The ACS Control register (offset 6 of the ACS extended capability, ID 0x000d, found by walking
// the extended capability list from offset 0x100); nullopt when the device has no ACS capability
// or the bytes do not reach it.
std::optional<uint16_t> acs_control(std::string_view config);
inline constexpr uint16_t kAcsSourceValidation = 0x0001;  // SrcValid, bit 0 of ACS Control

struct AcsScan {
  std::vector<std::string> source_validation;  // bridges with SrcValid enabled, sorted
  size_t bridges = 0;                          // PCI bridges (class 0x0604xx) looked at
  size_t unreadable = 0;  // bridges whose configuration space could not be read
};
// Every PCI bridge under /sys/bus/pci/devices: the ones whose ACS Control enables Source
// Validation, which forces peer-to-peer traffic (GPU to GPU, GPU to NIC) up through the root
// complex.
AcsScan scan_acs_source_validation(const HostFs& fs);

// The virtualization gpud runs under: "none" on bare metal (no "hypervisor" flag in /proc/cpuinfo's
// x86 "flags"), else the hypervisor the DMI vendor and product name tell ("kvm", "qemu", "vmware",
// "microsoft", "xen", "amazon", "google", "oracle"), or "vm" when they tell none. On arm64, whose
// cpuinfo has no flags, a VM is what the DMI names a hypervisor (not an EC2 "*.metal") or what has
// a /proc/device-tree/hypervisor node; the rest is bare metal. "" when /proc/cpuinfo cannot be
// read.
std::string virtualization(const HostFs& fs);

}  // namespace gpud::host
