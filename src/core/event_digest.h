// EventDigest: what a component's rule needs of a long event history, in memory bounded by the
// distinct kinds of event rather than by how many there are. The SQLite EventStore digests in the
// database; any other EventLog gives back its whole answer.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/event_log.h"

namespace gpud {

struct EventDigest {
  uint64_t total = 0;  // events in the range
  // Newest first, in EventLog::query()'s order: the oldest and the newest event of each group (one
  // when the group has one event). A group is the events of one name and type that agree on every
  // key path and have no split time between them.
  std::vector<Event> events;
  // Parallel to `events`: how many events of the range each one stands for (the oldest of a group
  // stands for itself, the newest for the rest of its group); they add up to `total`.
  std::vector<uint64_t> counts;
};

// An event log that can digest a range itself (the store: without reading the range into memory).
class EventDigestSource {
 public:
  virtual ~EventDigestSource() = default;
  virtual Result<EventDigest> digest(std::string_view component, TimePoint since, TimePoint until,
                                     const std::vector<std::string>& key_paths,
                                     const std::vector<TimePoint>& splits) const = 0;
};

// The events of one component with since < time <= until that set-healthy has not acknowledged,
// digested: grouped on their name, their
// type and their extra_info values at `key_paths` (JSON pointers: "/xid", "/repair_actions/0"; an
// absent value is a value too), with groups split at each of `splits` (an event at a split's very
// time falls before it). A replay in which a later event of a group supersedes the earlier ones
// (the Xid/SXid state machine, replay_errors) judges the digest as it judges all the events. An
// event log that is not an EventDigestSource answers with every unacknowledged event (a digest that
// drops nothing).
[[nodiscard]] Result<EventDigest> digest_events(const EventLog& log, std::string_view component,
                                                TimePoint since, TimePoint until,
                                                const std::vector<std::string>& key_paths,
                                                const std::vector<TimePoint>& splits);

}  // namespace gpud
