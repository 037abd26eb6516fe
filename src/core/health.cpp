#include "core/health.h"

#include <algorithm>
#include <array>
#include <utility>

namespace gpud {
namespace {

constexpr std::array<std::pair<Health, std::string_view>, 4> kHealthNames{{
    {Health::kHealthy, "Healthy"},
    {Health::kDegraded, "Degraded"},
    {Health::kUnhealthy, "Unhealthy"},
    {Health::kInitializing, "Initializing"},
}};
constexpr std::array<std::pair<RepairAction, std::string_view>, 4> kActionNames{{
    {RepairAction::kIgnoreNoActionRequired, "IGNORE_NO_ACTION_REQUIRED"},
    {RepairAction::kRebootSystem, "REBOOT_SYSTEM"},
    {RepairAction::kHardwareInspection, "HARDWARE_INSPECTION"},
    {RepairAction::kCheckUserAppAndGpu, "CHECK_USER_APP_AND_GPU"},
}};
constexpr std::array<std::pair<EventType, std::string_view>, 5> kEventTypeNames{{
    {EventType::kUnknown, "Unknown"},
    {EventType::kInfo, "Info"},
    {EventType::kWarning, "Warning"},
    {EventType::kCritical, "Critical"},
    {EventType::kFatal, "Fatal"},
}};

template <typename E, size_t N>
std::string_view name_of(const std::array<std::pair<E, std::string_view>, N>& table, E v) {
  for (const auto& [e, n] : table)
    if (e == v) return n;
  return "Unknown";
}

template <typename E, size_t N>
std::optional<E> parse_of(const std::array<std::pair<E, std::string_view>, N>& table,
                          std::string_view s) {
  for (const auto& [e, n] : table)
    if (n == s) return e;
  return std::nullopt;
}

}  // namespace

std::string_view to_string(Health h) { return name_of(kHealthNames, h); }
std::string_view to_string(RepairAction a) { return name_of(kActionNames, a); }
std::string_view to_string(EventType t) { return name_of(kEventTypeNames, t); }
std::optional<Health> parse_health(std::string_view s) { return parse_of(kHealthNames, s); }
std::optional<RepairAction> parse_repair_action(std::string_view s) {
  return parse_of(kActionNames, s);
}
std::optional<EventType> parse_event_type(std::string_view s) {
  return parse_of(kEventTypeNames, s);
}

int severity(Health h) {
  switch (h) {
    case Health::kHealthy: return 0;
    case Health::kInitializing: return 1;
    case Health::kDegraded: return 2;
    case Health::kUnhealthy: return 3;
  }
  return 3;
}

Health worst(Health a, Health b) { return severity(a) >= severity(b) ? a : b; }

Health CheckResult::health() const {
  Health h = Health::kHealthy;
  for (const auto& s : states) h = worst(h, s.health);
  return h;
}

std::string CheckResult::summary() const {
  std::string out;
  for (const auto& s : states) {
    if (s.reason.empty()) continue;
    if (!out.empty()) out += "; ";
    out += s.reason;
  }
  return out;
}

CheckResult single_state(std::string_view component, Health health, std::string reason,
                         std::optional<SuggestedActions> actions, nlohmann::json data,
                         TimePoint now) {
  HealthState s;
  s.time = now;
  s.component = std::string(component);
  s.name = std::string(component);
  s.health = health;
  s.reason = std::move(reason);
  s.suggested_actions = std::move(actions);
  s.data = std::move(data);
  CheckResult r;
  r.states.push_back(std::move(s));
  return r;
}

}  // namespace gpud

namespace gpud {

Finding Finding::about(Subject subject, Health health, std::string reason,
                       std::optional<RepairAction> action) {
  Finding f;
  f.subject = std::move(subject);
  f.health = health;
  f.reason = std::move(reason);
  f.action = action;
  return f;
}

Finding Finding::blocked(Subject subject, Health health, std::string reason, std::string owner) {
  Finding f = about(std::move(subject), health, std::move(reason));
  f.blocked_by = std::move(owner);
  return f;
}

bool not_checked(const HealthState& s) {
  return std::any_of(s.findings.begin(), s.findings.end(),
                     [](const Finding& f) { return f.blocked_by.has_value(); });
}

bool check_succeeded(const CheckResult& result) {
  for (const HealthState& s : result.states)
    if (!s.error.empty() || s.health == Health::kInitializing) return false;
  return true;
}

}  // namespace gpud

namespace gpud {

std::vector<Event> unacknowledged(std::vector<Event> events) {
  std::erase_if(events, [](const Event& e) { return e.acknowledged.has_value(); });
  return events;
}

}  // namespace gpud
