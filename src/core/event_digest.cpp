#include "core/event_digest.h"

#include "core/health.h"

namespace gpud {

Result<EventDigest> digest_events(const EventLog& log, std::string_view component, TimePoint since,
                                  TimePoint until, const std::vector<std::string>& key_paths,
                                  const std::vector<TimePoint>& splits) {
  if (const auto* source = dynamic_cast<const EventDigestSource*>(&log))
    return source->digest(component, since, until, key_paths, splits);
  auto all = log.query(component, since, until);
  if (!all) return all.error();
  EventDigest d;
  d.events = unacknowledged(std::move(*all));
  d.total = d.events.size();
  d.counts.assign(d.events.size(), 1);
  return d;
}

}  // namespace gpud
