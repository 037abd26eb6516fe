// Readers of a CheckResult for the NVIDIA components' tests (header-only, tests only).
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "core/health.h"

namespace gpud::components::testing {

inline bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// The first repair action of the first state, if any.
inline std::optional<RepairAction> action_of(const CheckResult& r) {
  const auto& a = r.states.at(0).suggested_actions;
  if (!a || a->repair_actions.empty()) return std::nullopt;
  return a->repair_actions.front();
}

// The first state's data (extra_info.data on the wire).
inline nlohmann::json data_of(const CheckResult& r) { return r.states.at(0).data; }

}  // namespace gpud::components::testing
