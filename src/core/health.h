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
  std::map<std::string, std::string> extra_info;
  std::string raw_output;
};

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

// What one check() produced: the states, plus a human-readable detail block for `gpud scan`.
struct CheckResult {
  std::vector<HealthState> states;
  std::string detail;

  Health health() const;        // the worst of the states (Healthy when empty)
  std::string summary() const;  // the reasons of the states, joined
};

// Whether a check read what it watches: no state carries an error and none is Initializing.
bool check_succeeded(const CheckResult& result);

// Builds the single-state result most components return.
CheckResult single_state(std::string_view component, Health health, std::string reason,
                         std::optional<SuggestedActions> actions = std::nullopt,
                         std::map<std::string, std::string> extra_info = {},
                         TimePoint now = Clock::now());

}  // namespace gpud
