#include "server/query_params.h"

#include "core/parse_number.h"
#include "core/time_util.h"
#include "server/routes.h"

namespace gpud::server {

namespace {

Result<TimePoint> time_param(const httplib::Request& req, const char* key, TimePoint fallback) {
  if (!req.has_param(key)) return fallback;
  std::string raw = req.get_param_value(key);
  if (raw.empty()) return fallback;
  auto t = parse_time(raw);
  if (!t)
    return make_error(std::string("invalid ") + key + " \"" + raw +
                          "\": want Unix seconds or RFC 3339 from " + std::string(kTimeRangeText),
                      400);
  return *t;
}

}  // namespace

Result<Window> window_params(const httplib::Request& req, TimePoint now) {
  auto start = time_param(req, "startTime", now - kDefaultEventsWindow);
  if (!start) return start.error();
  auto end = time_param(req, "endTime", now);
  if (!end) return end.error();
  if (*start > *end)
    return make_error(
        "startTime " + format_rfc3339(*start) + " is after endTime " + format_rfc3339(*end), 400);
  return Window{*start, *end};
}

Result<TimePoint> since_param(const httplib::Request& req, TimePoint now) {
  std::string raw = req.has_param("since") ? req.get_param_value("since") : "";
  if (raw.empty()) return now - kDefaultMetricsSince;
  auto d = parse_duration(raw);
  if (!d)
    return make_error("invalid since \"" + raw +
                          "\": want a duration such as 30m, 1h30m or 90s, at most " +
                          std::string(kMaxDurationText),
                      400);
  return saturating_sub(now, *d);
}

std::string format_cursor(const PageCursor& c) {
  return std::to_string(c.until_ms) + "_" + std::to_string(c.offset) + "_" + c.component;
}

std::optional<PageCursor> parse_cursor(std::string_view s) {
  auto a = s.find('_');
  if (a == std::string_view::npos) return std::nullopt;
  auto b = s.find('_', a + 1);
  if (b == std::string_view::npos || b + 1 >= s.size()) return std::nullopt;
  auto until = parse_integer<int64_t>(s.substr(0, a));
  auto offset = parse_integer<size_t>(s.substr(a + 1, b - a - 1));
  if (!until || !offset || !parse_time(std::to_string(*until / 1000))) return std::nullopt;
  return PageCursor{*until, *offset, std::string(s.substr(b + 1))};
}

Result<Paging> paging_params(const httplib::Request& req) {
  Paging p;
  if (std::string raw = req.get_param_value("limit"); !raw.empty()) {
    auto n = parse_integer<size_t>(raw);
    if (!n || *n < 1 || *n > kMaxPageRows)
      return make_error("invalid limit \"" + raw + "\": want 1 to " + std::to_string(kMaxPageRows),
                        400);
    p.limit = *n;
  }
  if (std::string raw = req.get_param_value("cursor"); !raw.empty()) {
    p.cursor = parse_cursor(raw);
    if (!p.cursor)
      return make_error("invalid cursor \"" + raw + "\": pass the previous page's " +
                            std::string(kNextCursorHeader) + " unchanged",
                        400);
  }
  return p;
}

}  // namespace gpud::server
