// accelerator-nvidia-fabric-manager: the NVML fabric state and health of each GPU where the
// product has it (H100/H200/GB200 SXM), and the fabric manager service (nv-fabricmanager on PATH,
// localhost:6666 answering) where the product needs it and NVSwitches are present.
#pragma once

#include <optional>
#include <string>

#include "components/nvidia/nvidia_component.h"
#include "components/nvidia/verdict.h"
#include "host/host_fs.h"

namespace gpud::components {

inline constexpr std::string_view kFabricManagerName = "accelerator-nvidia-fabric-manager";
inline constexpr int kFabricManagerPort = 6666;

// Counts PCI devices with vendor 0x10de and class 0x0680xx (NVSwitch bridges) under
// /sys/bus/pci/devices; nullopt when that directory cannot be read.
std::optional<int> count_nvswitches(const host::HostFs& fs);
// An executable named `name` in one of the PATH directories.
bool executable_on_path(std::string_view name, std::string_view path_env);
// TCP connect to 127.0.0.1:port within `timeout`.
bool tcp_port_answers(int port, std::chrono::milliseconds timeout);

// What the service check found (filled only when it ran).
struct FabricManagerProbe {
  std::optional<int> nvswitches;  // nullopt: could not be detected
  bool binary_found = false;
  bool port_open = false;
};

// Whether the GPUs sit on an NVLink fabric: at least two GPUs, and an NVSwitch on the PCI bus, an
// active NVLink (GB200 trays hold their switches off this host's bus) or a GPU whose fabric state
// is other than Not Supported (a fabric that has not come up).
bool nvlink_fabric_present(const nvml::NvmlSnapshot& snapshot, const FabricManagerProbe& probe);

// The rule (fabric state only where nvlink_fabric_present): fabric state not Completed, status not
// Success, health summary Unhealthy/Limited capacity or a health-mask issue ⇒ Unhealthy; service
// needed but binary missing or port closed ⇒ Unhealthy.
NvidiaVerdict evaluate_fabric_manager(const nvml::NvmlSnapshot& snapshot,
                                      const FabricManagerProbe& probe);
// Whether the service check applies: product needs FM and NVSwitches are present (or, when they
// cannot be detected, nv-fabricmanager is installed).
bool fabric_manager_service_expected(const catalog::ProductCaps& caps,
                                     const FabricManagerProbe& probe);

class FabricManagerComponent : public NvidiaComponent {
 public:
  explicit FabricManagerComponent(const ComponentContext& ctx);
  std::string_view name() const override { return kFabricManagerName; }

 protected:
  CheckResult evaluate(const nvml::NvmlSnapshot& snapshot) override;

 private:
  host::HostFs fs_;
};

}  // namespace gpud::components
