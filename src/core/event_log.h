// EventLog: the interface components use to persist and read their events. The SQLite EventStore
// implements it; core does not depend on the store.
#pragma once

#include <string_view>
#include <vector>

#include "core/health.h"
#include "core/result.h"

namespace gpud {

class EventLog {
 public:
  virtual ~EventLog() = default;
  // Inserts the event unless an identical one (component, time to the second, name, type, message,
  // extra_info) is already stored; returns true when it was inserted.
  virtual Result<bool> insert(const Event& event) = 0;
  // Events of one component (all components when empty) with since < time <= until, newest first.
  virtual Result<std::vector<Event>> query(std::string_view component, TimePoint since,
                                           TimePoint until) const = 0;
  // Deletes one component's events with time < before (all of them with TimePoint::max()).
  virtual Result<int> purge(std::string_view component, TimePoint before) = 0;
};

}  // namespace gpud
