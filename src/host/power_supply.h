// Power supplies as the kernel lists them in /sys/class/power_supply (the kernel's
// Documentation/ABI/testing/sysfs-class-power): one directory per supply with its type, and where
// the driver has them, whether it is present and online, its status and its capacity.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/result.h"
#include "host/host_fs.h"

namespace gpud::host {

inline constexpr const char* kPowerSupplyDir = "/sys/class/power_supply";

struct PowerSupply {
  std::string name;             // the directory name, e.g. "AC", "BAT0", "PSU1"
  std::string type;             // "Battery", "UPS", "Mains", "USB", "Wireless"
  std::optional<bool> present;  // `present`: 0/1; absent for supplies without the attribute
  // `online`: 0 offline, 1 online, 2 online with programmable output (USB); absent when the
  // driver does not report it (e.g. batteries).
  std::optional<int> online;
  std::string status;  // "Charging", "Discharging", "Not charging", "Full", "Unknown"; "" absent
  std::optional<int> capacity_percent;  // `capacity`: 0-100
  std::string error;  // the files that were missing or garbled, named; "" when all were read
};

struct PowerSupplies {
  bool class_present = false;         // /sys/class/power_supply exists
  std::vector<PowerSupply> supplies;  // sorted by name
};

// Reads every supply. `type` is required (the ABI has it for every supply); `present`, `online`,
// `status` and `capacity` are optional, but a value that is there and garbled is an error of that
// supply. A missing class directory is no supplies, not an error; an unreadable one is.
Result<PowerSupplies> read_power_supplies(const HostFs& fs);

}  // namespace gpud::host
