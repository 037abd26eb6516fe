#include "core/json.h"

#include "core/time_util.h"

namespace gpud {

nlohmann::json to_json(const SuggestedActions& a) {
  nlohmann::json actions = nlohmann::json::array();
  for (auto r : a.repair_actions) actions.push_back(std::string(to_string(r)));
  return {{"description", a.description}, {"repair_actions", actions}};
}

std::map<std::string, std::string> wire_extra_info(const HealthState& s) {
  std::map<std::string, std::string> out = s.extra_info;
  if (!s.data.is_null()) out["data"] = s.data.dump();
  nlohmann::json gpu_findings = nlohmann::json::array();
  nlohmann::json devices = nlohmann::json::array();
  nlohmann::json not_checked = nlohmann::json::array();
  for (const Finding& f : s.findings) {
    const std::string action = f.action ? std::string(to_string(*f.action)) : "";
    if (f.blocked_by) {
      not_checked.push_back(f.blocked_by->empty() || *f.blocked_by == s.component
                                ? f.reason
                                : f.reason + ", see " + *f.blocked_by);
    } else if (f.subject.index) {
      if (f.health == Health::kHealthy) continue;
      nlohmann::json j = {{"gpu", *f.subject.index},
                          {"health", std::string(to_string(f.health))},
                          {"reason", f.reason}};
      if (f.action) j["suggested_action"] = action;
      gpu_findings.push_back(std::move(j));
    } else if (!f.subject.bus_id.empty()) {
      nlohmann::json j = {{"pci_bus_id", f.subject.bus_id},
                          {"health", std::string(to_string(f.health))},
                          {"suggested_action", action},
                          {"reason", f.reason}};
      if (f.code) j["code"] = *f.code;
      if (f.injected) j["injected"] = true;
      devices.push_back(std::move(j));
    }
  }
  if (!gpu_findings.empty()) out["gpu_findings"] = gpu_findings.dump();
  if (!devices.empty()) out["devices"] = devices.dump();
  if (!not_checked.empty()) out["not_checked"] = not_checked.dump();
  return out;
}

nlohmann::json to_json(const HealthState& s) {
  nlohmann::json j = {
      {"time", format_rfc3339(s.time)},
      {"component", s.component},
      {"name", s.name},
      {"health", std::string(to_string(s.health))},
      {"reason", s.reason},
  };
  if (!s.component_type.empty()) j["component_type"] = s.component_type;
  if (!s.run_mode.empty()) j["run_mode"] = s.run_mode;
  if (!s.error.empty()) j["error"] = s.error;
  if (s.suggested_actions) j["suggested_actions"] = to_json(*s.suggested_actions);
  if (auto extra = wire_extra_info(s); !extra.empty()) j["extra_info"] = std::move(extra);
  if (!s.raw_output.empty()) j["raw_output"] = s.raw_output;
  return j;
}

nlohmann::json to_json(const Event& e) {
  nlohmann::json j = {
      {"component", e.component}, {"time", format_rfc3339(e.time)},
      {"name", e.name},           {"type", std::string(to_string(e.type))},
      {"message", e.message},
  };
  if (e.extra_info.is_object() && !e.extra_info.empty()) j["extra_info"] = e.extra_info;
  if (e.acknowledged)
    j["acknowledged"] = {{"time", format_rfc3339(e.acknowledged->time)},
                         {"by", e.acknowledged->by}};
  return j;
}

nlohmann::json to_json(const MetricSample& m) {
  return {
      {"unix_seconds", m.unix_ms / 1000},
      {"unix_milliseconds", m.unix_ms},
      {"name", m.name},
      {"labels", m.labels},
      {"value", m.value},
  };
}

nlohmann::json to_json(const std::vector<HealthState>& states) {
  nlohmann::json j = nlohmann::json::array();
  for (const auto& s : states) j.push_back(to_json(s));
  return j;
}

nlohmann::json to_json(const std::vector<Event>& events) {
  nlohmann::json j = nlohmann::json::array();
  for (const auto& e : events) j.push_back(to_json(e));
  return j;
}

}  // namespace gpud
