// BusIdentityTable: the node's NVIDIA devices by PCI bus id, with each GPU's UUID where NVML named
// it. It is the data the event pipeline names a kernel-log line's GPU from: app/ builds it (from
// NVML's last good snapshot and sysfs) and hands it to the pipeline when it changes; the pipeline
// never asks a higher layer for it.
#pragma once

#include <map>
#include <string>
#include <string_view>

#include "kmsg/rules.h"

namespace gpud::kmsg {

struct BusIdentityTable {
  // Normalized bus id ("0000:3b:00.0") -> the GPU's UUID; "" where the device is known but its
  // UUID is not (sysfs lists it, NVML does not name it).
  std::map<std::string, std::string, std::less<>> uuid_by_bus;

  // What the table says of a bus id as a line writes it (any case, 4- or 8-digit domain).
  BusIdentity identify(std::string_view pci_bus_id) const;
  bool operator==(const BusIdentityTable&) const = default;
};

}  // namespace gpud::kmsg
