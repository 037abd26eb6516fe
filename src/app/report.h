// Rendering of `gpud scan` and `gpud status` output: the human report and the JSON document.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/health.h"
#include "kmsg/event_pipeline.h"

namespace gpud::app {

struct ScanEntry {
  std::string component;
  CheckResult result;
  std::vector<Event> events;
};

// {"machine_info":{…},"components":[{"component":…,"states":[…],"events":[…]}],
//  "kernel_log_summary":[{"pci_bus_id":…,"kind":"Xid","code":79,"count":14,…}]}. An event whose
// line gave no wall-clock time has no "time" (its extra_info says boot_offset_seconds when known).
nlohmann::json scan_json(const nlohmann::json& machine_info, const std::vector<ScanEntry>& entries,
                         const std::vector<kmsg::Occurrences>& occurrences = {});
// One ✔/✘ line per component, then the details of every non-healthy one, then every Xid/SXid
// code per GPU (count, first and last seen), then a summary line.
std::string scan_text(const nlohmann::json& machine_info, const std::vector<ScanEntry>& entries,
                      const std::vector<kmsg::Occurrences>& occurrences = {});
// When an event happened, for people: RFC 3339, or "boot + 1005.03 s" when its line gave only the
// offset since boot, or "time unknown".
std::string event_time_text(const Event& e);
// One line per component from a /v1/states document.
std::string states_text(const nlohmann::json& states);

}  // namespace gpud::app
