#include "core/json.h"

#include "core/time_util.h"

namespace gpud {

nlohmann::json to_json(const SuggestedActions& a) {
  nlohmann::json actions = nlohmann::json::array();
  for (auto r : a.repair_actions) actions.push_back(std::string(to_string(r)));
  return {{"description", a.description}, {"repair_actions", actions}};
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
  if (!s.extra_info.empty()) j["extra_info"] = s.extra_info;
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
