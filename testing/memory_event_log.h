// MemoryEventLog: an in-memory EventLog for tests, with the SQLite EventStore's contract (an
// identical event is stored once, queries are since < time <= until and newest first, purge per
// component or all).
#pragma once

#include <algorithm>
#include <mutex>
#include <string_view>
#include <vector>

#include "core/event_log.h"
#include "core/time_util.h"

namespace gpud::testing_support {

class MemoryEventLog : public EventLog {
 public:
  Result<bool> insert(const Event& e) override {
    std::lock_guard lock(mu_);
    for (const Event& x : events)
      if (x.component == e.component && to_unix_seconds(x.time) == to_unix_seconds(e.time) &&
          x.name == e.name && x.type == e.type && x.message == e.message &&
          x.extra_info == e.extra_info)
        return false;
    events.push_back(e);
    return true;
  }
  Result<std::vector<Event>> query(std::string_view component, TimePoint since,
                                   TimePoint until) const override {
    std::lock_guard lock(mu_);
    if (!query_error.empty()) return make_error(query_error);
    std::vector<Event> out;
    for (const Event& e : events)
      if ((component.empty() || e.component == component) && e.time > since && e.time <= until)
        out.push_back(e);
    std::sort(out.begin(), out.end(),
              [](const Event& a, const Event& b) { return a.time > b.time; });
    return out;
  }
  Result<int> purge(std::string_view component, TimePoint before) override {
    std::lock_guard lock(mu_);
    auto n = std::erase_if(events, [&](const Event& e) {
      return (component.empty() || e.component == component) && e.time < before;
    });
    return static_cast<int>(n);
  }
  Result<int> acknowledge(std::string_view component, TimePoint until,
                          const Acknowledgement& ack) override {
    std::lock_guard lock(mu_);
    int n = 0;
    for (Event& e : events)
      if (e.component == component && e.time <= until && !e.acknowledged) {
        e.acknowledged = ack;
        ++n;
      }
    return n;
  }
  std::vector<Event> named(std::string_view name) const {
    std::lock_guard lock(mu_);
    std::vector<Event> out;
    for (const Event& e : events)
      if (e.name == name) out.push_back(e);
    return out;
  }
  size_t count(std::string_view component) const {
    std::lock_guard lock(mu_);
    return static_cast<size_t>(std::count_if(
        events.begin(), events.end(), [&](const Event& e) { return e.component == component; }));
  }

  // Tests read and seed this directly while no component runs.
  std::vector<Event> events;
  // Non-empty: every query fails with this message, as a broken store's would.
  std::string query_error;

 private:
  mutable std::mutex mu_;
};

}  // namespace gpud::testing_support
