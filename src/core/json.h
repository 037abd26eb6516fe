// JSON encoding of the health model with GPUd's field names (snake_case; times RFC 3339 UTC).
#pragma once

#include <nlohmann/json.hpp>

#include "core/health.h"

namespace gpud {

nlohmann::json to_json(const SuggestedActions& a);
// GPUd's extra_info strings of a state: its extra_info, plus "data" (the typed data, dumped) and
// its findings as JSON text: "gpu_findings" [{gpu, health, reason, suggested_action?}] (a GPU known
// by index), "devices" [{pci_bus_id, code?, health, suggested_action, reason, injected?}] (a device
// known by its bus id alone: Xid, SXid), "not_checked" ["<reason>[, see <owner>]"] (blocked).
std::map<std::string, std::string> wire_extra_info(const HealthState& s);
nlohmann::json to_json(const HealthState& s);
// API event: component, time, name, type, message, plus extra_info and, once set-healthy
// acknowledged it, acknowledged {time, by} (additions to GPUd's shape).
nlohmann::json to_json(const Event& e);
// API metric: unix_seconds (really seconds, unlike GPUd), unix_milliseconds, name, labels, value.
nlohmann::json to_json(const MetricSample& m);
nlohmann::json to_json(const std::vector<HealthState>& states);
nlohmann::json to_json(const std::vector<Event>& events);

}  // namespace gpud
