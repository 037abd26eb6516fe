// Reboot-aware repair rules shared by the kernel-log components: GPUd's EvaluateSuggestedActions
// (disk, nfs) and the Xid/SXid replay state machine (§3.4 of the reference), as pure functions.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/health.h"
#include "core/result.h"

namespace gpud {

// GPUd's EvaluateSuggestedActions, the one copy (disk, nfs, gpu-counts): nullopt when there is no
// failure or the newest reboot came strictly after the newest failure (resolved by the reboot);
// REBOOT_SYSTEM without reboots, or with only one reboot or failure; otherwise HARDWARE_INSPECTION
// once failures followed at least `max_reboots` distinct reboots, else REBOOT_SYSTEM. A failure at
// the same instant as a reboot follows that reboot (event times are cut to the second, so a
// failure seen at boot often shares its reboot's second).
std::optional<RepairAction> evaluate_suggested_actions(std::vector<TimePoint> reboots,
                                                       std::vector<TimePoint> failures,
                                                       int max_reboots = 2);

// HARDWARE_INSPECTION dominates REBOOT_SYSTEM dominates the rest.
std::optional<RepairAction> aggregate_actions(const std::vector<RepairAction>& actions);

// Per-code reboot thresholds (--xid-reboot-threshold, --xid-thresholds).
inline constexpr int kDefaultRebootThreshold = 2;  // --xid-reboot-threshold's default
struct RebootThresholds {
  int default_threshold = kDefaultRebootThreshold;
  std::map<int, int> overrides;  // code -> threshold
  int threshold(int code) const;
};

// Parses `{"overrides":{"94":{"rebootThreshold":1000}}}` (empty: no overrides) and merges it over
// `defaults` (whose overrides stay unless the document replaces the same code).
[[nodiscard]] Result<RebootThresholds> parse_reboot_thresholds(const std::string& json,
                                                               RebootThresholds defaults);

// One entry of the Xid/SXid replay: an error event of the component or a reboot of the host.
struct ErrorRecord {
  TimePoint time{};
  bool reboot = false;
  int code = 0;
  EventType type = EventType::kWarning;
  std::optional<RepairAction> action;  // the catalog's first repair action
  std::string reason;                  // what the state says when this record is the last error
  std::string device;     // the GPU's or NVSwitch's PCI bus id ("": none named); reboots: unused
  bool injected = false;  // written by gpud inject-fault, not by the driver
};

// One device's current error in a per-device replay.
struct DeviceError {
  std::string device;
  int code = 0;
  Health health = Health::kHealthy;
  std::optional<RepairAction> action;
  std::string reason;
  bool injected = false;  // ErrorVerdict::injected of its replay
};

struct ErrorVerdict {
  Health health = Health::kHealthy;
  std::string reason;  // empty when no error is current
  std::optional<SuggestedActions> actions;
  int last_code = 0;  // 0: none
  // Every error the verdict stands on (those at its level since the last reboot that cleared
  // them) was injected: a drill, which alerts leave out.
  bool injected = false;
  std::vector<DeviceError> devices;  // replay_errors_per_device: each device with a current error
};

// The §3.4 state machine: replays the records oldest to newest. Fatal -> Unhealthy, Critical ->
// Degraded, others stay Healthy (but become the last error); a less severe error never replaces a
// more severe one; a reboot clears an error whose action is REBOOT_SYSTEM or CHECK_USER_APP_AND_GPU
// and counts one reboot for every code seen; a REBOOT_SYSTEM code seen again after its threshold
// of reboots escalates to HARDWARE_INSPECTION.
ErrorVerdict replay_errors(std::vector<ErrorRecord> records, const RebootThresholds& thresholds);

// The replay per device: each device's errors are replayed alone with every reboot, so an error on
// one GPU neither hides nor clears another's, and a code escalates on the device it repeats on.
// Health is the worst device's; the reason lists every device with a current error, worst first
// (health, then action, then bus id), joined with "; "; the suggested action is the strongest of
// theirs; last_code is the first listed device's code.
ErrorVerdict replay_errors_per_device(std::vector<ErrorRecord> records,
                                      const RebootThresholds& thresholds);

// What a suggested action means, as the reason's action description says it.
std::string describe_repair_action(RepairAction a);

}  // namespace gpud
