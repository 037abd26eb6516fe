// The health model shared by every component and surface: states, repair actions, events, metric
// samples.
#pragma once

#include <chrono>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpud {

using Clock = std::chrono::system_clock;
using TimePoint = Clock::time_point;

enum class Health { kHealthy, kDegraded, kUnhealthy, kInitializing };
enum class RepairAction {
  kIgnoreNoActionRequired,
  kRebootSystem,
  kHardwareInspection,
  kCheckUserAppAndGpu
};
enum class EventType { kUnknown, kInfo, kWarning, kCritical, kFatal };

std::string_view to_string(Health h);
std::string_view to_string(RepairAction a);
std::string_view to_string(EventType t);
std::optional<Health> parse_health(std::string_view s);
std::optional<RepairAction> parse_repair_action(std::string_view s);
std::optional<EventType> parse_event_type(std::string_view s);

// Orders health by severity: Healthy < Initializing < Degraded < Unhealthy.
int severity(Health h);
Health worst(Health a, Health b);

struct SuggestedActions {
  std::string description;
  std::vector<RepairAction> repair_actions;
  bool operator==(const SuggestedActions&) const = default;
};

// What a finding is about: the host, one GPU or one NVSwitch, with the identity the check knew
// (an Xid names a GPU by its bus id only).
struct Subject {
  enum class Kind { kHost, kGpu, kNvSwitch };
  Kind kind = Kind::kHost;
  std::optional<unsigned int> index;  // the GPU's NVML index
  std::string uuid;
  std::string bus_id;
  bool operator==(const Subject&) const = default;

  static Subject host() { return {}; }
  static Subject gpu(unsigned int index, std::string uuid, std::string bus_id) {
    return {Kind::kGpu, index, std::move(uuid), std::move(bus_id)};
  }
  // A GPU known by its bus id alone (a kernel-log line).
  static Subject gpu_at(std::string bus_id) {
    return {Kind::kGpu, std::nullopt, {}, std::move(bus_id)};
  }
  static Subject nvswitch_at(std::string bus_id) {
    return {Kind::kNvSwitch, std::nullopt, {}, std::move(bus_id)};
  }
  // Every GPU: what NVML itself failed to do (not loaded, failed, not answering) is each GPU's.
  static Subject every_gpu() { return {Kind::kGpu, std::nullopt, {}, {}}; }
  bool is_every_gpu() const {
    return kind == Kind::kGpu && !index && uuid.empty() && bus_id.empty();
  }
};

// One thing a check found about one subject, or could not check. The typed form of what a state's
// reason says: /v1/gpus, the per-GPU metric, the sinks and `gpud scan` read it; the wire's
// extra_info keys gpu_findings, devices and not_checked are rendered from it (to_json).
struct Finding {
  Subject subject;
  Health health = Health::kHealthy;
  std::string reason;
  std::optional<RepairAction> action;
  // Set when the check was not made: the component that owns what blocked it (itself when its own
  // source failed). Such a finding judges nothing: its health is the state's, usually Healthy.
  std::optional<std::string> blocked_by;
  std::optional<int> code;  // the Xid or SXid
  bool injected = false;    // it stands on faults gpud injected (a drill)
  bool operator==(const Finding&) const = default;

  static Finding about(Subject subject, Health health, std::string reason,
                       std::optional<RepairAction> action = std::nullopt);
  // A check not made because of what `owner` reports (or its own source, owner = the component).
  static Finding blocked(Subject subject, Health health, std::string reason, std::string owner);
};

struct HealthState {
  TimePoint time{};
  std::string component;
  std::string component_type;  // "" or "custom-plugin"
  std::string name;
  std::string run_mode;  // "" / "auto" / "manual"
  Health health = Health::kHealthy;
  std::string reason;
  std::string error;
  std::optional<SuggestedActions> suggested_actions;
  // GPUd's extra_info: strings. A component's own data and findings are typed below and rendered
  // into it where the wire is written (to_json): "data" (data.dump()), "gpu_findings", "devices",
  // "not_checked".
  std::map<std::string, std::string> extra_info;
  std::string raw_output;
  nlohmann::json data;  // null: none
  std::vector<Finding> findings;
};

// Whether something kept the state from checking all it watches (a finding with blocked_by).
bool not_checked(const HealthState& s);

// Who acknowledged an event with set-healthy, and when. An acknowledged event is kept for the
// timeline but no longer judged by its component.
struct Acknowledgement {
  TimePoint time{};
  std::string by;  // "token", "uid:<n>" (a loopback TCP peer), "local socket"
  bool operator==(const Acknowledgement&) const = default;
};

struct Event {
  std::string component;
  TimePoint time{};
  std::string name;
  EventType type = EventType::kInfo;
  std::string message;
  nlohmann::json extra_info = nlohmann::json::object();        // always an object
  std::optional<Acknowledgement> acknowledged = std::nullopt;  // set-healthy marked it
};

// The events nobody acknowledged: what a component's rule judges.
std::vector<Event> unacknowledged(std::vector<Event> events);

// One stored or live metric value. Times are Unix milliseconds.
struct MetricSample {
  int64_t unix_ms = 0;
  std::string component;
  std::string name;
  std::map<std::string, std::string> labels;  // without gpud_component
  double value = 0;
};

// What one check() produced: the states (each with its typed data and findings), plus a
// human-readable detail block for `gpud scan`.
struct CheckResult {
  std::vector<HealthState> states;
  std::string detail;

  Health health() const;        // the worst of the states (Healthy when empty)
  std::string summary() const;  // the reasons of the states, joined
};

// Whether a check read what it watches: no state carries an error and none is Initializing.
bool check_succeeded(const CheckResult& result);

// Builds the single-state result most components return; `data` is its extra_info.data.
CheckResult single_state(std::string_view component, Health health, std::string reason,
                         std::optional<SuggestedActions> actions = std::nullopt,
                         nlohmann::json data = nullptr, TimePoint now = Clock::now());
// GPUd's extra_info strings are set on the state itself; a map here would silently become data.
CheckResult single_state(std::string_view component, Health health, std::string reason,
                         std::optional<SuggestedActions> actions,
                         std::map<std::string, std::string> extra_info,
                         TimePoint now = Clock::now()) = delete;

}  // namespace gpud
