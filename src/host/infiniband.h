// Infiniband: the ports of the host's RDMA adapters as the kernel's ib_core shows them in
// /sys/class/infiniband/<device>/ports/<n>/ (Documentation/ABI/stable/sysfs-class-infiniband), and
// where each adapter sits on the PCI bus.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "host/host_fs.h"

namespace gpud::host {

// One port. A value that could not be read or parsed is absent, with the reason in `errors`.
struct InfinibandPort {
  std::string device;                     // "mlx5_0"
  int port = 0;                           // 1-based, as in sysfs
  std::optional<std::string> state;       // "ACTIVE" (sysfs "4: ACTIVE")
  std::optional<std::string> phys_state;  // "LinkUp" (sysfs "5: LinkUp")
  std::optional<double> rate_gbps;        // 400 (sysfs "400 Gb/sec (4X NDR)")
  std::optional<std::string> link_layer;  // "InfiniBand" or "Ethernet"
  // counters/<name> and hw_counters/<name>: only those that parsed as unsigned integers.
  std::map<std::string, uint64_t> counters;
  std::map<std::string, uint64_t> hw_counters;
  std::vector<std::string> errors;  // "rate: cannot parse \"fast\""

  bool infiniband() const { return link_layer && *link_layer == "InfiniBand"; }
  bool active() const { return state && *state == "ACTIVE"; }
  bool link_up() const { return phys_state && *phys_state == "LinkUp"; }
  // "mlx5_0_1", GPUd's device_port label.
  std::string device_port() const { return device + "_" + std::to_string(port); }
  std::optional<uint64_t> counter(std::string_view name) const;
};

// One adapter and its place on the PCI bus.
struct InfinibandDevice {
  std::string name;        // "mlx5_0"
  std::string pci_bus_id;  // "0000:1a:00.0"; "" when `device` is no PCI device
  // The PCI addresses from the root port down to the adapter itself, from the resolved sysfs
  // path ("/sys/devices/pci0000:17/0000:17:01.0/0000:18:00.0/0000:19:01.0/0000:1a:00.0").
  std::vector<std::string> pci_path;
};

struct InfinibandSnapshot {
  bool class_dir_present = false;         // false: no RDMA driver loaded (no adapters)
  std::vector<InfinibandDevice> devices;  // sorted by name, excluded ones left out
  std::vector<InfinibandPort> ports;      // sorted by device, then port
  std::vector<std::string> errors;        // a device whose ports could not be listed
};

// "4: ACTIVE" -> "ACTIVE", "5: LinkUp" -> "LinkUp"; a value without the number is kept as it is;
// nullopt for an empty value.
std::optional<std::string> parse_port_state(std::string_view text);
// "400 Gb/sec (4X NDR)" -> 400, "2.5 Gb/sec (1X SDR)" -> 2.5; nullopt for anything else.
std::optional<double> parse_port_rate(std::string_view text);

// Reads every device under `class_dir` (an absolute path: <host root>/sys/class/infiniband, or
// --infiniband-class-root-dir) except those named in `excluded`. A missing class_dir is an empty
// snapshot with class_dir_present false; a class_dir that exists but cannot be listed is an error.
[[nodiscard]] Result<InfinibandSnapshot> read_infiniband(const std::string& class_dir,
                                                         const std::vector<std::string>& excluded);

// The PCI addresses in a resolved sysfs device path, in order (the bridges, then the device).
std::vector<std::string> pci_path_of(std::string_view resolved_path);
// The resolved sysfs path of a PCI device under the host root (via /sys/bus/pci/devices/<bdf>),
// split by pci_path_of; empty when it cannot be resolved.
std::vector<std::string> pci_path_of_device(const HostFs& fs, const std::string& bus_id);
// How many upstream bridges two devices' pci_path_of paths share (the devices themselves not
// counted): 0 when they share none below the host bridge.
size_t shared_bridges(const std::vector<std::string>& a, const std::vector<std::string>& b);

}  // namespace gpud::host
