// Time formatting and parsing used by the API and the store: RFC 3339 UTC, Unix seconds, Go-style
// durations.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/health.h"

namespace gpud {

// The times gpud accepts from outside (API parameters, parsed log dates): 1970-01-01T00:00:00Z to
// the last whole second TimePoint can hold (2262-04-11T23:47:16Z).
inline constexpr int64_t kMinUnixSeconds = 0;
inline constexpr int64_t kMaxUnixSeconds =
    std::chrono::duration_cast<std::chrono::seconds>(TimePoint::duration::max()).count();
inline constexpr std::string_view kTimeRangeText = "1970-01-01T00:00:00Z to 2262-04-11T23:47:16Z";
// The longest duration a flag or parameter accepts.
inline constexpr std::chrono::hours kMaxDuration{24 * 365 * 100};
inline constexpr std::string_view kMaxDurationText = "100 years (876000h)";

// t + d and t - d clamped to what TimePoint can hold: a huge retention or lookback means "from
// the beginning", never a wrap into the future.
template <typename Rep, typename Period>
TimePoint saturating_add(TimePoint t, std::chrono::duration<Rep, Period> d) {
  using D = TimePoint::duration;
  const auto in_ticks =
      std::chrono::duration_cast<std::chrono::duration<long double, D::period>>(d);
  const long double sum = static_cast<long double>(t.time_since_epoch().count()) + in_ticks.count();
  if (sum >= static_cast<long double>(D::max().count())) return TimePoint::max();
  if (sum <= static_cast<long double>(D::min().count())) return TimePoint::min();
  return t + std::chrono::duration_cast<D>(d);
}
template <typename Rep, typename Period>
TimePoint saturating_sub(TimePoint t, std::chrono::duration<Rep, Period> d) {
  return saturating_add(t, -d);
}

std::string format_rfc3339(TimePoint t);  // "2024-01-02T03:04:05Z", second precision, UTC
// Accepts RFC 3339 ("2024-01-02T03:04:05Z", "...05.123+02:00") or Unix seconds ("1704164645")
// inside kTimeRangeText; nullopt otherwise.
std::optional<TimePoint> parse_time(std::string_view s);
// Accepts Go-style durations ("30m", "1h30m", "90s", "336h", "1.5h", "500ms") and plain seconds
// ("90"), at most kMaxDuration.
std::optional<std::chrono::milliseconds> parse_duration(std::string_view s);
std::string format_duration(std::chrono::seconds d);  // "1h30m0s" style, as Go prints it
int64_t to_unix_ms(TimePoint t);
int64_t to_unix_seconds(TimePoint t);
TimePoint from_unix_ms(int64_t ms);
TimePoint from_unix_seconds(int64_t s);

}  // namespace gpud
