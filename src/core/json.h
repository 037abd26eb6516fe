// JSON encoding of the health model with GPUd's field names (snake_case; times RFC 3339 UTC).
#pragma once

#include <nlohmann/json.hpp>

#include "core/health.h"

namespace gpud {

nlohmann::json to_json(const SuggestedActions& a);
nlohmann::json to_json(const HealthState& s);
// API event: component, time, name, type, message, plus extra_info and, once set-healthy
// acknowledged it, acknowledged {time, by} (additions to GPUd's shape).
nlohmann::json to_json(const Event& e);
// API metric: unix_seconds (really seconds, unlike GPUd), unix_milliseconds, name, labels, value.
nlohmann::json to_json(const MetricSample& m);
nlohmann::json to_json(const std::vector<HealthState>& states);
nlohmann::json to_json(const std::vector<Event>& events);

}  // namespace gpud
