// MachineInfo: the host part of /machine-info (GPUd's camelCase field names), read through HostFs.
#pragma once

#include <nlohmann/json.hpp>

#include "host/host_fs.h"

namespace gpud::host {

// Collects hostname, machineID, bootID, kernelVersion, osImage, operatingSystem, uptime (boot time,
// RFC 3339), cpuInfo{type, manufacturer, architecture, logicalCores}, memoryInfo{totalBytes},
// diskInfo{blockDevices[...] from sysfs, containerRootDisk},
// nicInfo{privateIPInterfaces[{interface, mac, ip}]}, gpudVersion, and empty strings for the GPU
// fields (filled by the NVML layer later). Never fails as a whole: a field it cannot read is left
// empty.
nlohmann::json collect_machine_info(const HostFs& fs);

}  // namespace gpud::host
