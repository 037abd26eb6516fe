// EventStore: components' events in SQLite, deduplicated on insert, with retention enforced for all
// of them. An event the database cannot take (disk full, a damaged file being replaced) waits in a
// bounded in-memory backlog: it is read back with the stored events at once, and written, oldest
// first, as soon as the database takes writes again.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "core/event_digest.h"
#include "core/event_log.h"
#include "store/database.h"

namespace gpud::store {

// Events held in memory while the database cannot write (gauge), and those refused because the
// backlog was full (counter).
inline constexpr std::string_view kStoreEventBacklog = "gpud_store_event_backlog";
inline constexpr std::string_view kStoreEventsDroppedTotal = "gpud_store_events_dropped_total";

// Events are small (a kernel-log line and a few fields, well under 1 KiB), so the default bounds
// the backlog to a few MiB: hours of a fault storm that the kernel-log deduper let through.
inline constexpr size_t kDefaultEventBacklogCapacity = 10000;

class EventStore : public EventLog, public EventDigestSource {
 public:
  explicit EventStore(Database& db, size_t backlog_capacity = kDefaultEventBacklogCapacity);

  // Writes the event, or queues it behind the events already waiting (so that they are stored in
  // the order they came). True when it was new (neither stored nor waiting); an error only when
  // the backlog is full, and then the event is dropped and counted.
  Result<bool> insert(const Event& event) override;
  // Writes the events in one transaction (an import of many: one commit, not one each), skipping
  // those stored already; element i says whether events[i] was new. Nothing waits in the backlog:
  // when the database cannot write, none of them is stored and the error is returned.
  [[nodiscard]] Result<std::vector<bool>> insert_batch(const std::vector<Event>& events);
  // Stored and waiting events together.
  Result<std::vector<Event>> query(std::string_view component, TimePoint since,
                                   TimePoint until) const override;
  // In SQL (LIMIT/OFFSET) while nothing waits in the backlog; else the first offset + limit stored
  // events merged with the waiting ones.
  Result<std::vector<Event>> query_page(std::string_view component, TimePoint since,
                                        TimePoint until, size_t offset,
                                        size_t limit) const override;
  // Reads the stored rows one at a time, oldest first, keeping only each group's first and last
  // row ids; then reads those rows. Waiting events take part as query() merges them.
  Result<EventDigest> digest(std::string_view component, TimePoint since, TimePoint until,
                             const std::vector<std::string>& key_paths,
                             const std::vector<TimePoint>& splits) const override;
  Result<int> purge(std::string_view component, TimePoint before) override;
  // Waiting events are marked too, and written marked.
  Result<int> acknowledge(std::string_view component, TimePoint until,
                          const Acknowledgement& ack) override;
  // Deletes events of every component older than now - retention; returns how many.
  Result<int> enforce_retention(std::chrono::seconds retention, TimePoint now = Clock::now());
  // The newest event of one component with this name, if any (e.g. the last "reboot").
  Result<std::optional<Event>> latest(std::string_view component, std::string_view name) const;

  // Writes waiting events, oldest first, until one fails (then it stays first); retries a failed
  // replacement of a corrupt database first. Returns how many still wait.
  size_t retry();
  size_t backlog_size() const;
  size_t backlog_capacity() const { return capacity_; }
  uint64_t dropped() const;  // refused because the backlog was full, since start

 private:
  struct Waiting {
    Event event;      // as the database would return it (time in whole seconds)
    std::string key;  // the columns the store deduplicates on
  };

  Result<std::vector<Event>> query_rows(std::string_view component, TimePoint since,
                                        TimePoint until, size_t offset, size_t limit) const;
  Result<bool> write_locked(const Event& event);
  void flush_locked();
  Result<bool> enqueue_locked(const Event& event);
  void rebuild_keys_locked();
  void publish_backlog_locked();

  Database& db_;
  const size_t capacity_;
  // Guarded by db_.mutex(), as the database is; keys_ views the keys of backlog_'s entries, which
  // a deque keeps in place when entries are added at the back or removed at the front.
  std::deque<Waiting> backlog_;
  std::unordered_set<std::string_view> keys_;
  uint64_t dropped_ = 0;
};

}  // namespace gpud::store
