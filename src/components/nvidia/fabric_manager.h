// accelerator-nvidia-fabric-manager: the NVML fabric state and health of each GPU where the
// product has it (H100/H200/GB200 SXM), and the fabric manager service (nv-fabricmanager on PATH,
// localhost:6666 answering) where the product needs it and NVSwitches are present; and the fabric
// manager's log (fabric_manager_log.h), whose NV_WARN_NOTHING_TO_DO excuses a stopped service.
#pragma once

#include <mutex>
#include <optional>
#include <string>

#include "components/nvidia/fabric_manager_log.h"
#include "components/nvidia/nvidia_component.h"
#include "components/nvidia/verdict.h"
#include "core/log.h"
#include "host/host_fs.h"

namespace gpud::components {

inline constexpr std::string_view kFabricManagerName = "accelerator-nvidia-fabric-manager";
inline constexpr int kFabricManagerPort = 6666;

// Counts PCI devices with vendor 0x10de and class 0x0680xx (NVSwitch bridges) under
// /sys/bus/pci/devices; nullopt when that directory cannot be read.
std::optional<int> count_nvswitches(const host::HostFs& fs);
// TCP connect to 127.0.0.1:port within `timeout`.
bool tcp_port_answers(int port, std::chrono::milliseconds timeout);

// What the service check found (filled only when it ran).
struct FabricManagerProbe {
  FabricManagerProbe() = default;
  FabricManagerProbe(std::optional<int> switches, bool found, bool open)
      : nvswitches(switches), binary_found(found), port_open(open) {}
  std::optional<int> nvswitches;  // nullopt: could not be detected
  bool binary_found = false;
  bool port_open = false;
  // When the fabric manager last logged NV_WARN_NOTHING_TO_DO within kNothingToDoWindow: it found
  // nothing to manage and exited on purpose, so a closed port is no fault.
  std::optional<TimePoint> nothing_to_do_at;
  // How long the fabric has had to come up: since boot, or since the fabric manager (re)started
  // when that is later; nullopt when neither could be read.
  std::optional<std::chrono::seconds> training_elapsed;
  // While training_elapsed is under this, a fabric "In Progress" is Initializing.
  std::chrono::seconds training_grace{std::chrono::minutes(5)};
};

inline constexpr std::chrono::minutes kNothingToDoWindow{10};

// Whether the GPUs sit on an NVLink fabric: at least two GPUs, and an NVSwitch on the PCI bus, an
// active NVLink (GB200 trays hold their switches off this host's bus) or a GPU whose fabric state
// is other than Not Supported (a fabric that has not come up).
bool nvlink_fabric_present(const nvml::NvmlSnapshot& snapshot, const FabricManagerProbe& probe);

// The rule (fabric state only where nvlink_fabric_present): fabric state not Completed, status not
// Success, health summary Unhealthy/Limited capacity or a health-mask issue ⇒ Unhealthy, except a
// state "In Progress" within the training grace ⇒ Initializing; service needed but binary missing,
// or port closed without a recent NV_WARN_NOTHING_TO_DO ⇒ Unhealthy.
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
  // Records what the log says since the last check; returns the newest NV_WARN_NOTHING_TO_DO
  // within the window (from the store, or from this read when there is none) and what could not be
  // read.
  std::optional<TimePoint> read_log(bool journal, std::vector<std::string>& errors);
  // Seconds since boot, or since the running nv-fabricmanager process started when later.
  std::optional<std::chrono::seconds> training_elapsed(TimePoint now) const;

  host::HostFs fs_;
  std::mutex log_mu_;  // a triggered check may overlap the scheduled one
  FabricManagerLogReader log_;
  std::optional<TimePoint> nothing_to_do_at_;  // the newest one read, for a run without a store
  LogRateLimiter log_limiter_{std::chrono::minutes(10)};
};

// The start time of the oldest process named `comm` (/proc/<pid>/stat's starttime after the boot
// time); nullopt when none runs or it cannot be read.
std::optional<TimePoint> process_start_time(const host::HostFs& fs, std::string_view comm,
                                            TimePoint boot_time);

}  // namespace gpud::components
