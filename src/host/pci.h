// Pci: whether the host has an NVIDIA GPU, from sysfs (vendor 0x10de, class VGA 0x0300 or 3D
// 0x0302).
#pragma once

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
// PCI addresses of every NVIDIA device (vendor 0x10de: GPUs, NVSwitches, bridges), sorted.
std::vector<std::string> find_nvidia_devices(const HostFs& fs);

}  // namespace gpud::host
