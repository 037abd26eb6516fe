// What the daemon knows of the node's NVIDIA devices by PCI bus id, as the table the event pipeline
// names a kernel-log line's GPU from (kmsg::BusIdentityTable).
#pragma once

#include <string>
#include <vector>

#include "kmsg/bus_identity_table.h"
#include "nvml/device.h"

namespace gpud::app {

// Every GPU of NVML's snapshot (null: none yet) with its UUID, and every NVIDIA device sysfs
// lists (its UUID unknown unless NVML names it too). Bus ids are normalized.
kmsg::BusIdentityTable bus_identity_table(const nvml::NvmlSnapshot* nvml,
                                          const std::vector<std::string>& sysfs_nvidia_devices);

}  // namespace gpud::app
