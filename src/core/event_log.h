// EventLog: the interface components use to persist and read their events. The SQLite EventStore
// implements it; core does not depend on the store.
#pragma once

#include <algorithm>
#include <cstddef>
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
  // One page of query()'s answer: at most `limit` events, after skipping the first `offset`. This
  // default slices query()'s whole answer; the store reads only the page's rows, so that serving a
  // long history takes bounded memory.
  virtual Result<std::vector<Event>> query_page(std::string_view component, TimePoint since,
                                                TimePoint until, size_t offset,
                                                size_t limit) const {
    auto all = query(component, since, until);
    if (!all) return all;
    std::vector<Event> page;
    for (size_t i = offset; i < all->size() && page.size() < limit; ++i)
      page.push_back(std::move((*all)[i]));
    return page;
  }
  // Deletes one component's events with time < before (all of them with TimePoint::max()).
  virtual Result<int> purge(std::string_view component, TimePoint before) = 0;
  // Marks one component's unacknowledged events with time <= until as acknowledged (they stay
  // listed; rules skip them); returns how many.
  virtual Result<int> acknowledge(std::string_view component, TimePoint until,
                                  const Acknowledgement& ack) = 0;
};

}  // namespace gpud
