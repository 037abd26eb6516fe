#include "core/reboot_rules.h"

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

namespace gpud {

std::optional<RepairAction> evaluate_suggested_actions(std::vector<TimePoint> reboots,
                                                       std::vector<TimePoint> failures,
                                                       int max_reboots) {
  if (failures.empty()) return std::nullopt;
  if (reboots.empty()) return RepairAction::kRebootSystem;
  std::sort(reboots.begin(), reboots.end());
  std::sort(failures.begin(), failures.end());
  if (reboots.back() > failures.back()) return std::nullopt;
  if (reboots.size() == 1 || failures.size() == 1) return RepairAction::kRebootSystem;
  // Each failure is paired with the newest reboot at or before it (a failure stamped with its
  // reboot's second came after it, as GPUd's "not before the reboot" and the strict "resolved"
  // test above agree); distinct pairs count the reboots that did not fix the failure.
  std::set<TimePoint> preceding;
  for (TimePoint f : failures) {
    auto it = std::upper_bound(reboots.begin(), reboots.end(), f);
    if (it == reboots.begin()) continue;
    preceding.insert(*std::prev(it));
  }
  if (static_cast<int>(preceding.size()) >= max_reboots) return RepairAction::kHardwareInspection;
  return RepairAction::kRebootSystem;
}

std::optional<RepairAction> aggregate_actions(const std::vector<RepairAction>& actions) {
  std::optional<RepairAction> out;
  for (RepairAction a : actions) {
    if (a == RepairAction::kHardwareInspection) return a;
    if (a == RepairAction::kRebootSystem) out = a;
    if (!out) out = a;
  }
  return out;
}

int RebootThresholds::threshold(int code) const {
  auto it = overrides.find(code);
  return it == overrides.end() ? default_threshold : it->second;
}

Result<RebootThresholds> parse_reboot_thresholds(const std::string& json,
                                                 RebootThresholds defaults) {
  if (json.empty()) return defaults;
  auto doc = nlohmann::json::parse(json, nullptr, false);
  if (doc.is_discarded() || !doc.is_object())
    return make_error("invalid thresholds \"" + json + "\": want a JSON object");
  if (!doc.contains("overrides")) return defaults;
  const auto& ov = doc["overrides"];
  if (!ov.is_object())
    return make_error("invalid thresholds: \"overrides\" must map codes to objects");
  for (const auto& [key, value] : ov.items()) {
    int code = 0;
    try {
      size_t used = 0;
      code = std::stoi(key, &used);
      if (used != key.size() || code <= 0) throw std::invalid_argument(key);
    } catch (const std::exception&) {
      return make_error("invalid thresholds: \"" + key + "\" is not a positive code");
    }
    if (!value.is_object() || !value.contains("rebootThreshold") ||
        !value["rebootThreshold"].is_number_integer() || value["rebootThreshold"].get<int>() < 1)
      return make_error("invalid thresholds: code " + key +
                        " needs {\"rebootThreshold\": <positive integer>}");
    defaults.overrides[code] = value["rebootThreshold"].get<int>();
  }
  return defaults;
}

namespace {
int level_of(EventType t) {
  if (t == EventType::kFatal) return 2;
  if (t == EventType::kCritical) return 1;
  return 0;
}
}  // namespace

ErrorVerdict replay_errors(std::vector<ErrorRecord> records, const RebootThresholds& thresholds) {
  std::stable_sort(records.begin(), records.end(),
                   [](const ErrorRecord& a, const ErrorRecord& b) { return a.time < b.time; });
  std::map<int, int> reboots_seen;  // code -> reboots since its first sighting
  int level = 0;
  const ErrorRecord* last = nullptr;
  bool injected = false;  // every record at `level` since the last clearing was injected
  // A plain pair instead of std::optional: g++-12 -O2 warns maybe-uninitialized on the latter.
  bool has_action = false;
  RepairAction action = RepairAction::kIgnoreNoActionRequired;
  for (const ErrorRecord& r : records) {
    if (r.reboot) {
      if (last != nullptr && has_action &&
          (action == RepairAction::kRebootSystem || action == RepairAction::kCheckUserAppAndGpu)) {
        last = nullptr;
        has_action = false;
        level = 0;
      }
      for (auto& [code, n] : reboots_seen) ++n;
      continue;
    }
    const int l = level_of(r.type);
    if (l < level) continue;  // a more severe error stays sticky
    injected = r.injected && (last == nullptr || l > level || injected);
    level = l;
    last = &r;
    has_action = r.action.has_value();
    action = r.action.value_or(RepairAction::kIgnoreNoActionRequired);
    if (has_action && action == RepairAction::kRebootSystem) {
      auto [it, first] = reboots_seen.emplace(r.code, 0);
      if (!first && it->second >= thresholds.threshold(r.code))
        action = RepairAction::kHardwareInspection;
    }
  }
  ErrorVerdict v;
  if (last == nullptr) return v;
  v.last_code = last->code;
  v.health = level == 2 ? Health::kUnhealthy : level == 1 ? Health::kDegraded : Health::kHealthy;
  v.reason = last->reason;
  v.injected = injected;
  if (has_action && v.health != Health::kHealthy)
    v.actions = SuggestedActions{describe_repair_action(action), {action}};
  return v;
}

std::string describe_repair_action(RepairAction a) {
  switch (a) {
    case RepairAction::kRebootSystem: return "reboot the system to recover from the error";
    case RepairAction::kHardwareInspection:
      return "the error persisted across reboots or needs a hardware inspection";
    case RepairAction::kCheckUserAppAndGpu: return "check the user application and the GPU";
    default: return "no action required";
  }
}

namespace {
int action_strength(const std::optional<RepairAction>& a) {
  if (!a) return 0;
  if (*a == RepairAction::kHardwareInspection) return 3;
  if (*a == RepairAction::kRebootSystem) return 2;
  return 1;
}
}  // namespace

ErrorVerdict replay_errors_per_device(std::vector<ErrorRecord> records,
                                      const RebootThresholds& thresholds) {
  std::vector<ErrorRecord> reboots;
  std::map<std::string, std::vector<ErrorRecord>> by_device;
  for (ErrorRecord& r : records) {
    if (r.reboot)
      reboots.push_back(std::move(r));
    else
      by_device[r.device].push_back(std::move(r));
  }
  ErrorVerdict out;
  for (auto& [device, errors] : by_device) {
    errors.insert(errors.end(), reboots.begin(), reboots.end());
    ErrorVerdict v = replay_errors(std::move(errors), thresholds);
    if (v.last_code == 0 && v.reason.empty()) continue;  // cleared by a reboot
    DeviceError d{device, v.last_code, v.health, std::nullopt, v.reason, v.injected};
    if (v.actions && !v.actions->repair_actions.empty()) d.action = v.actions->repair_actions[0];
    out.devices.push_back(std::move(d));
  }
  std::stable_sort(out.devices.begin(), out.devices.end(),
                   [](const DeviceError& a, const DeviceError& b) {
                     if (severity(a.health) != severity(b.health))
                       return severity(a.health) > severity(b.health);
                     return action_strength(a.action) > action_strength(b.action);
                   });
  std::optional<RepairAction> strongest;
  for (const DeviceError& d : out.devices) {
    if (out.reason.empty()) {
      out.health = d.health;
      out.last_code = d.code;
    }
    out.reason += (out.reason.empty() ? "" : "; ") + d.reason;
    if (d.health != Health::kHealthy && action_strength(d.action) > action_strength(strongest))
      strongest = d.action;
  }
  if (strongest) out.actions = SuggestedActions{describe_repair_action(*strongest), {*strongest}};
  return out;
}

}  // namespace gpud
