// InfinibandComponent ("accelerator-nvidia-infiniband"): the InfiniBand ports of the host's RDMA
// adapters from sysfs (how many are up at the expected rate, drops and flaps from the history of
// their state changes, counters as metrics, the GPUs nearest each adapter on the PCI bus), and the
// MLX5 kernel-log events.
#pragma once

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "components/kernel_log_support.h"
#include "host/host_fs.h"
#include "host/infiniband.h"

namespace gpud::components {

// MLX5 adapters in the kernel log (drivers/net/ethernet/mellanox/mlx5/core): insufficient PCIe
// slot power, an overheated port module, a failed ACCESS_REG command; the firmware's health
// (compromised, fatal errors, its syndrome), firmware command timeouts, a failed probe, TX
// timeouts and port module errors.
kmsg::ComponentRules infiniband_kernel_log_rules();

inline constexpr const char* kMlx5HealthCompromisedEvent = "mlx5_health_compromised";
inline constexpr const char* kMlx5FatalErrorEvent = "mlx5_fatal_error";
inline constexpr const char* kMlx5FirmwareSyndromeEvent = "mlx5_firmware_syndrome";
inline constexpr const char* kMlx5CommandTimeoutEvent = "mlx5_cmd_timeout";
inline constexpr const char* kMlx5ProbeFailedEvent = "mlx5_probe_failed";
inline constexpr const char* kMlx5FirmwareInitTimeoutEvent = "mlx5_firmware_init_timeout";
inline constexpr const char* kMlx5TxTimeoutEvent = "mlx5_tx_timeout";
inline constexpr const char* kMlx5PortModuleErrorEvent = "mlx5_port_module_error";
// How long a command timeout, TX timeout or port module error keeps the component Degraded.
inline constexpr std::chrono::hours kMlx5TroubleWindow{24};

// The rule over the component's MLX5 kernel-log events (any order) and the host's reboots: a
// compromised health, a fatal error or a failed probe with no reboot after it -> Unhealthy with
// REBOOT_SYSTEM (HARDWARE_INSPECTION once it came back after reboots, evaluate_suggested_actions);
// else a command timeout, TX timeout or port module error since the newest reboot and within
// kMlx5TroubleWindow -> Degraded. The other events (syndromes, slot power, temperature,
// ACCESS_REG) are listed only.
KernelLogVerdict evaluate_mlx5_events(const std::vector<Event>& events,
                                      const std::vector<TimePoint>& reboots, TimePoint now);

// The state changes of a port the component records, and reads back as its history.
inline constexpr const char* kIbPortDownEvent = "ib_port_down";
inline constexpr const char* kIbPortUpEvent = "ib_port_up";

struct InfinibandPolicy {
  // --infiniband-expected-port-states; the port-count rule runs only when both are set.
  int at_least_ports = 0;
  double at_least_rate_gbps = 0;
  // A port down this long with an unchanged link_downed counter is a drop.
  std::chrono::seconds drop_window{std::chrono::minutes(4)};
  // A drop that ended is still reported this long after the port came back.
  std::chrono::seconds drop_sticky{std::chrono::minutes(10)};
  // Down-then-active cycles (in the history kept since the last set-healthy) that make a flap.
  int flap_cycles = 3;
  // --infiniband-flap-auto-clear-window. 0 (GPUd's default): a flap stays reported until
  // set-healthy. Above 0: a flapping port is reported while it is not up, and until it has been up
  // this long since its newest return; then it clears by itself.
  std::chrono::seconds flap_auto_clear{0};
  bool expects_ports() const { return at_least_ports > 0 && at_least_rate_gbps > 0; }
};

// Adapter name -> the bus ids of the GPUs that share its deepest upstream PCI bridge (the PCIe
// switch of an HGX tray); an adapter that shares no bridge with any GPU has no entry.
using NearestGpus = std::map<std::string, std::vector<std::string>>;
NearestGpus nearest_gpus(const std::vector<host::InfinibandDevice>& devices,
                         const std::map<std::string, std::vector<std::string>>& gpu_pci_paths);

// Whether a port is down (state DOWN, or physically not LinkUp) or up (ACTIVE and LinkUp); a port
// whose state could not be read, or is in between (INIT, ARMED), is neither.
bool port_down(const host::InfinibandPort& p);
bool port_up(const host::InfinibandPort& p);

// The state changes to record for this snapshot, given the component's history (newest first) and
// the ports that were up when this process last saw them: ib_port_down when a port that was up (the
// latest change in the history says so, or this process saw it up last) is down now, or is still
// down with a link_downed counter that rose (it came back and went down again between two checks);
// ib_port_up when a port whose latest change is a down is up again.
std::vector<Event> port_transitions(const host::InfinibandSnapshot& snapshot,
                                    const std::vector<Event>& history,
                                    const std::set<std::string>& last_up, TimePoint now);

// The rule. `history` is the component's events, newest first, with this check's transitions.
// No adapters -> Healthy (unless ports are expected); too few InfiniBand ports LinkUp at the rate
// -> Unhealthy naming the ports that are not (state, physical state, nearest GPUs); a drop (down
// >= drop_window with link_downed unchanged; reported while down and drop_sticky after) or a flap
// (>= flap_cycles down-then-up cycles; with flap_auto_clear, only while the port is not up or came
// back less than flap_auto_clear ago) -> Unhealthy + HARDWARE_INSPECTION; a value that could not
// be read -> Degraded with what and why, never Healthy.
CheckResult evaluate_infiniband(const Result<host::InfinibandSnapshot>& snapshot,
                                const std::vector<Event>& history, const NearestGpus& nearest,
                                const InfinibandPolicy& policy, TimePoint now);

class InfinibandComponent : public Component {
 public:
  explicit InfinibandComponent(const ComponentContext& ctx);
  std::string_view name() const override { return "accelerator-nvidia-infiniband"; }
  std::vector<std::string> tags() const override {
    return {"accelerator", "gpu", "nvidia", "accelerator-nvidia-infiniband"};
  }
  // With NVIDIA (as GPUd), or wherever an adapter shows in the class directory.
  bool supported() const override;
  std::chrono::seconds interval() const override;
  CheckResult check() override;
  // The default set-healthy purges the history (kernel-log events and port changes): drops and
  // flaps are forgotten, and a port still down stays so without counting as a new drop.
  bool can_set_healthy() const override { return true; }

 private:
  host::HostFs fs_;
  std::string class_dir_;
  InfinibandPolicy policy_;
  mutable std::atomic<bool> has_events_{false};
  std::mutex mu_;
  // device_port of the ports that were up when this process last saw them.
  std::set<std::string> last_up_;
};

}  // namespace gpud::components
