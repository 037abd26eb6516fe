// EventStore: components' events in SQLite, deduplicated on insert, with retention enforced for all
// of them.
#pragma once

#include <chrono>

#include "core/event_log.h"
#include "store/database.h"

namespace gpud::store {

class EventStore : public EventLog {
 public:
  explicit EventStore(Database& db) : db_(db) {}
  Result<bool> insert(const Event& event) override;
  Result<std::vector<Event>> query(std::string_view component, TimePoint since,
                                   TimePoint until) const override;
  Result<int> purge(std::string_view component, TimePoint before) override;
  // Deletes events of every component older than now - retention; returns how many.
  Result<int> enforce_retention(std::chrono::seconds retention, TimePoint now = Clock::now());
  // The newest event of one component with this name, if any (e.g. the last "reboot").
  Result<std::optional<Event>> latest(std::string_view component, std::string_view name) const;

 private:
  Database& db_;
};

}  // namespace gpud::store
