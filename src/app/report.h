// Rendering of `gpud scan` and `gpud status` output: the human report and the JSON document.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/health.h"

namespace gpud::app {

struct ScanEntry {
  std::string component;
  CheckResult result;
  std::vector<Event> events;
};

// {"machine_info":{…},"components":[{"component":…,"states":[…],"events":[…]}]}
nlohmann::json scan_json(const nlohmann::json& machine_info, const std::vector<ScanEntry>& entries);
// One ✔/✘ line per component, then the details of every non-healthy one, then a summary line.
std::string scan_text(const nlohmann::json& machine_info, const std::vector<ScanEntry>& entries);
// One line per component from a /v1/states document.
std::string states_text(const nlohmann::json& states);

}  // namespace gpud::app
