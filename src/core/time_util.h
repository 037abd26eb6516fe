// Time formatting and parsing used by the API and the store: RFC 3339 UTC, Unix seconds, Go-style
// durations.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

#include "core/health.h"

namespace gpud {

std::string format_rfc3339(TimePoint t);  // "2024-01-02T03:04:05Z", second precision, UTC
// Accepts RFC 3339 ("2024-01-02T03:04:05Z", "...05.123+02:00") or Unix seconds ("1704164645").
std::optional<TimePoint> parse_time(std::string_view s);
// Accepts Go-style durations ("30m", "1h30m", "90s", "336h", "1.5h", "500ms") and plain seconds
// ("90").
std::optional<std::chrono::milliseconds> parse_duration(std::string_view s);
std::string format_duration(std::chrono::seconds d);  // "1h30m0s" style, as Go prints it
int64_t to_unix_ms(TimePoint t);
int64_t to_unix_seconds(TimePoint t);
TimePoint from_unix_ms(int64_t ms);
TimePoint from_unix_seconds(int64_t s);

}  // namespace gpud
