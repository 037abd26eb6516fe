// SystemdComponent ("systemd"): the state of the systemd units a GPU node depends on (active or
// failed, automatic restarts and when they changed), asked of the host's systemd over D-Bus (its
// sockets under --host-root), else with `systemctl show`, under a deadline.
// Not applicable where systemd does not run the host.
#pragma once

#include <atomic>
#include <chrono>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "components/component.h"
#include "host/host_fs.h"
#include "host/systemctl.h"
#include "host/systemd_bus.h"

namespace gpud::components {

// A unit that restarted this often within the window is restart-looping.
inline constexpr uint64_t kRestartLoopCount = 3;
inline constexpr std::chrono::minutes kRestartLoopWindow{10};
inline constexpr std::chrono::seconds kSystemctlTimeout{10};

// Watched when --systemd-units is not given, each only where installed: gpud's own unit and the
// container runtime, kubelet and NVIDIA daemons a GPU node runs.
const std::vector<std::string>& default_systemd_units();

// The NRestarts a unit showed over time: how many automatic restarts happened within the window,
// and when the count last changed. A count that went down (the unit was restarted by hand, which
// resets it) starts the history afresh.
class RestartHistory {
 public:
  void observe(TimePoint now, uint64_t n_restarts);
  uint64_t restarts_within(TimePoint now, std::chrono::seconds window) const;
  std::optional<TimePoint> changed_at() const { return changed_at_; }

 private:
  std::deque<std::pair<TimePoint, uint64_t>> samples_;
  std::optional<TimePoint> changed_at_;
};

struct SystemdUnitReport {
  host::UnitState state;
  bool required = false;         // named by --systemd-units: must exist
  uint64_t recent_restarts = 0;  // automatic restarts seen within kRestartLoopWindow
  std::optional<TimePoint> restarts_changed_at;  // when NRestarts last changed, as seen by gpud
};

// Restart-looping: kRestartLoopCount restarts seen within the window, or waiting to restart again
// (SubState auto-restart) after kRestartLoopCount restarts already.
bool restart_looping(const SystemdUnitReport& u);

// The rule: systemctl failed ⇒ Unhealthy with its error; a unit that failed, is restart-looping,
// could not be read, or (named by --systemd-units) is not loaded ⇒ Unhealthy naming it; a default
// unit that is not installed is left out; else Healthy listing each unit's state.
CheckResult evaluate_systemd(const Result<std::vector<SystemdUnitReport>>& units);

// systemd could not be asked at all (`why`: no systemctl, no socket under the host root, the
// connection refused): Healthy "not checked: …" with `error` set and extra_info.not_checked, as
// other components report what they could not judge. A missing tool is not a fault of the host.
CheckResult evaluate_systemd_not_checked(const std::string& why);

class SystemdComponent : public Component {
 public:
  explicit SystemdComponent(const ComponentContext& ctx);

  std::string_view name() const override { return "systemd"; }
  bool supported() const override { return systemd_running_; }
  CheckResult check() override;

 private:
  bool systemd_running_;
  std::atomic<bool> warned_not_reached_{false};  // "cannot ask" is logged once
  std::mutex mu_;
  std::map<std::string, RestartHistory> history_;
};

}  // namespace gpud::components
