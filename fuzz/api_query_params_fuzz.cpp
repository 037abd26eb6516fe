// Any bytes as the query string of an API request: split and decoded as the server does, then the
// time window, `since`, paging and component-list parsers of /v1/events, /v1/metrics and
// /v1/info, and the time and duration parsers they share. Bad values are 400s, never a crash; a
// cursor that parses prints back to itself.

#include <httplib.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "core/time_util.h"
#include "server/http_util.h"
#include "server/query_params.h"

using namespace gpud;  // NOLINT(google-build-using-namespace)

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string query(reinterpret_cast<const char*>(data), size);
  httplib::Request req;
  httplib::detail::parse_query_text(query, req.params);
  const TimePoint now = from_unix_seconds(1'795'000'000);
  (void)server::window_params(req, now);
  (void)server::since_param(req, now);
  if (auto p = server::paging_params(req); p && p->cursor) {
    if (server::format_cursor(*p->cursor) != req.get_param_value("cursor")) {
      // A cursor may be written with leading zeros or a '+'; what it names must survive a round
      // trip of its own printing.
      auto again = server::parse_cursor(server::format_cursor(*p->cursor));
      if (!again || again->until_ms != p->cursor->until_ms || again->offset != p->cursor->offset ||
          again->component != p->cursor->component)
        std::abort();
    }
  }
  (void)server::split_list(req.get_param_value("components"));
  for (const auto& [key, value] : req.params) {
    if (auto t = parse_time(value)) (void)format_rfc3339(*t);
    if (auto d = parse_duration(value))
      (void)format_duration(std::chrono::duration_cast<std::chrono::seconds>(*d));
  }
  return 0;
}
