// OsComponent ("os"): kernel and identity of the host, reboot events, and process/file-handle
// health (zombies, processes stuck in uninterruptible sleep, PID and file-handle exhaustion).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "components/component.h"
#include "components/kernel_log_support.h"
#include "host/host_fs.h"
#include "host/os_info.h"
#include "host/processes.h"
#include "kmsg/rules.h"

namespace gpud::components {

// Kernel panics (with the CPU line that follows within ten lines), oopses, the VFS file-max limit,
// a network device whose references never drop (unregister_netdevice) and a transmit queue the
// network stack's watchdog found stuck (NETDEV WATCHDOG) in the kernel log.
kmsg::ComponentRules os_kernel_log_rules();

inline constexpr const char* kNetdevRefcountLeakEvent = "netdev_refcount_leak";
inline constexpr const char* kNetdevWatchdogEvent = "netdev_watchdog_timeout";

// A network device the kernel cannot free (net/core/dev.c keeps waiting for its references) stays
// until a reboot, and with it every namespace that held it: one since the newest reboot ->
// Degraded with REBOOT_SYSTEM ("network device eth0 cannot be freed: ..."). Reboot times any order.
KernelLogVerdict evaluate_netdev_refcount(const std::vector<Event>& events,
                                          const std::vector<TimePoint>& reboots);

struct OsThresholds {
  int64_t zombies_degraded = 1000;
  int64_t zombies_unhealthy = 2000;
  double degraded_percent = 80;
  double unhealthy_percent = 95;
  // file-max is often 2^63-1; GPUd measures usage against at most 10 million handles.
  int64_t file_handles_cap = 10'000'000;
  int persistence = 5;  // consecutive checks a process must stay in D state
  // RE2 patterns (--os-blocked-process-name-regexes): a persistent D-state process whose name
  // matches one is Unhealthy with REBOOT_SYSTEM (a hung driver), any other Degraded.
  std::vector<std::string> escalate_names{"^nvidia"};
};

struct BlockedProcess {
  int64_t pid = 0;
  std::string comm;
  int checks = 0;  // consecutive checks seen in D state, this one included
  bool operator==(const BlockedProcess&) const = default;
};

// Remembers which processes (pid + comm, so a reused pid starts over) were in D state in the
// previous checks.
class DStateTracker {
 public:
  // Feeds the D-state processes of one check; returns each one's streak. Processes absent from this
  // check are forgotten.
  std::vector<BlockedProcess> update(const std::vector<host::ProcPidStat>& blocked);
  void reset() { streaks_.clear(); }

 private:
  std::map<std::pair<int64_t, std::string>, int> streaks_;
};

struct OsSnapshot {
  host::OsInfo info;
  int64_t processes = 0;  // running PIDs (every /proc/<pid>)
  int64_t zombies = 0;
  int64_t blocked = 0;                                // in D state now
  std::map<std::string, int64_t> processes_by_state;  // "sleeping" -> 120
  std::vector<BlockedProcess> persistent_blocked;     // in D state for >= persistence checks
  int persistence = 5;
};

nlohmann::json to_json(const OsSnapshot& s);

struct OsEvaluation {
  Health health = Health::kHealthy;
  std::string reason;
  std::optional<SuggestedActions> actions;
};

// The limits the PID and file-handle rules divide by (0 when unknown).
int64_t pid_threshold(const OsSnapshot& s);
int64_t file_handle_threshold(const OsSnapshot& s, const OsThresholds& t);
// Every rule is evaluated; the result carries the worst health, the reasons joined worst first, and
// the suggested actions of the worst findings.
OsEvaluation evaluate_os(const OsSnapshot& s, const OsThresholds& t = {});

// True when boot_time is a new boot: nothing recorded yet, or more than 60 s newer than the last
// recorded reboot (uptime-derived boot times jitter by a second or so).
bool should_record_reboot(std::optional<TimePoint> last_recorded, TimePoint boot_time);
Event make_reboot_event(TimePoint boot_time);

class OsComponent : public Component {
 public:
  explicit OsComponent(const ComponentContext& ctx);

  std::string_view name() const override { return "os"; }
  CheckResult check() override;
  bool can_set_healthy() const override { return true; }
  // Forgets the D-state streaks and purges this component's events except the reboot history.
  Result<void> set_healthy(const Acknowledgement& ack) override;
  void start() override;

 private:
  host::HostFs fs_;
  OsThresholds thresholds_;
  std::mutex mu_;
  DStateTracker tracker_;
  bool persistent_episode_ = false;
};

}  // namespace gpud::components
