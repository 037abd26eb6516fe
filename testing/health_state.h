// Test helper: a component's state of the given health and reason, as a check would give it.
#pragma once

#include <string>
#include <utility>

#include "core/health.h"

namespace gpud::testing_support {

inline HealthState health_state(std::string component, Health health, std::string reason = "") {
  HealthState s;
  s.component = std::move(component);
  s.health = health;
  s.reason = std::move(reason);
  return s;
}

}  // namespace gpud::testing_support
