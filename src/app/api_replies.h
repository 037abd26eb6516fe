// Typed reading of the daemon's answers for `status` and `set-healthy`: every field the CLI uses is
// type-checked here, so an unexpected answer becomes an error message instead of an exception.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "core/result.h"

namespace gpud::app {

// /healthz: an object whose "status" is "ok".
[[nodiscard]] Result<void> check_healthz_reply(const std::string& body);

// /v1/states: an array of {"component": string, "states": [{"health": a known health,
// "reason": string (optional)}, ...]}. Returns the document, safe for states_text().
[[nodiscard]] Result<nlohmann::json> parse_states_reply(const std::string& body);
// Whether every state of a checked /v1/states document is Healthy.
bool all_healthy(const nlohmann::json& states);

// POST /v1/health-states/set-healthy (200, 400 and 404 share the shape).
struct SetHealthyReply {
  std::string message;
  std::vector<std::string> successful;
  std::vector<std::pair<std::string, std::string>> failed;  // component, reason
};
[[nodiscard]] Result<SetHealthyReply> parse_set_healthy_reply(const std::string& body);

// The "message" of a JSON error body, else the start of the body itself.
std::string error_message(int status, const std::string& body);

}  // namespace gpud::app
