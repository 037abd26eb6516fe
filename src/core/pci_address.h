// PCI bus ids in one canonical form, shared by every reader that names a device (NVML, the kernel
// log, sysfs), so that the same GPU has the same id wherever it is seen.
#pragma once

#include <string>
#include <string_view>

namespace gpud {

// "domain:bus:device.function" in lower-case hex, the domain as the kernel prints it (at least 4
// digits, more only when it needs them), bus and device 2 digits, function 1 digit (0 when
// absent): NVML's "00000000:3B:00.0", sysfs's "0000:3b:00.0", the kernel log's "PCI:0000:3b:00"
// and a bare "3b:00" all become "0000:3b:00.0"; NVML's "00010000:3B:00.0" becomes sysfs's
// "10000:3b:00.0". Text that is no PCI address comes back lower-cased, otherwise unchanged.
std::string normalize_pci_bus_id(std::string_view id);

// The same address as NVML's busId and DCGM write it: an 8-digit domain, upper-case hex
// ("0000:5d:00.0" becomes "00000000:5D:00.0"). Text that is no PCI address comes back lower-cased.
std::string nvml_pci_bus_id(std::string_view id);

}  // namespace gpud
