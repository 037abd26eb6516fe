// The query parameters of /v1/events, /v1/metrics and /v1/info: the time window, the metrics'
// `since`, and paging (`limit`, `cursor`). Each bad value is a 400 error that names it and says
// what is wanted; nothing a client sends can make them throw.
#pragma once

#include <httplib.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/health.h"
#include "core/result.h"
#include "server/routes.h"

namespace gpud::server {

inline constexpr auto kDefaultEventsWindow = std::chrono::hours(1);
inline constexpr auto kDefaultMetricsSince = std::chrono::minutes(30);

struct Window {
  TimePoint start;
  TimePoint end;
};

// startTime (default now - 1 h) and endTime (default now): Unix seconds or RFC 3339 in range.
[[nodiscard]] Result<Window> window_params(const httplib::Request& req, TimePoint now);
// since (default 30 min): a duration, at most kMaxDuration; the start of the metrics' window.
[[nodiscard]] Result<TimePoint> since_param(const httplib::Request& req, TimePoint now);

// Where the next page of a long /v1/events or /v1/metrics answer starts: the component, the rows
// of it already served, and the end of the window the first page fixed (so rows that arrive
// meanwhile do not shift the pages). Written "<until unix ms>_<offset>_<component>".
struct PageCursor {
  int64_t until_ms = 0;
  size_t offset = 0;
  std::string component;
};
std::string format_cursor(const PageCursor& c);
std::optional<PageCursor> parse_cursor(std::string_view s);

struct Paging {
  size_t limit = kMaxPageRows;
  std::optional<PageCursor> cursor;
};
// limit (1..kMaxPageRows) and cursor (a previous page's X-Gpud-Next-Cursor).
[[nodiscard]] Result<Paging> paging_params(const httplib::Request& req);

}  // namespace gpud::server
