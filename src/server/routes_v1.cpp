#include <httplib.h>

#include <algorithm>
#include <chrono>
#include <string>

#include "core/json.h"
#include "core/time_util.h"
#include "server/http_util.h"
#include "server/routes.h"

namespace gpud::server {
namespace {

using namespace std::chrono_literals;

constexpr auto kDefaultEventsWindow = 1h;
constexpr auto kDefaultMetricsSince = 30min;

struct Window {
  TimePoint start;
  TimePoint end;
};

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

void fail(const httplib::Request& req, httplib::Response& res, const Error& e) {
  write_error(req, res, e.code >= 400 && e.code < 600 ? e.code : 500, e.message);
}

Result<nlohmann::json> events_json(const Component& c, const Window& w) {
  auto events = c.events(w.start, w.end);
  if (!events)
    return make_error(
        "failed to read events of " + std::string(c.name()) + ": " + events.error().message, 500);
  return to_json(*events);
}

Result<nlohmann::json> metrics_json(const ServerDeps& deps, const Component& c, TimePoint since) {
  nlohmann::json out = nlohmann::json::array();
  if (deps.history == nullptr) return out;
  auto samples = deps.history->query(c.name(), since);
  if (!samples)
    return make_error(
        "failed to read metrics of " + std::string(c.name()) + ": " + samples.error().message, 500);
  for (const auto& s : *samples) out.push_back(to_json(s));
  return out;
}

}  // namespace

Handler negotiated(Handler h) {
  return [h = std::move(h)](const httplib::Request& req, httplib::Response& res) {
    if (auto err = content_type_error(req.get_header_value("Content-Type"))) {
      write_error(req, res, 400, *err);
      return;
    }
    h(req, res);
  };
}

Result<std::vector<Component*>> select_components(const Registry& registry,
                                                  std::string_view param) {
  auto names = split_list(param);
  if (names.empty()) return registry.supported();
  std::vector<Component*> out;
  for (const auto& n : names) {
    Component* c = registry.find(n);
    if (c == nullptr) return make_error("component not found: " + n, 404);
    if (!c->supported()) continue;
    if (std::find(out.begin(), out.end(), c) == out.end()) out.push_back(c);
  }
  return out;
}

void register_v1_routes(httplib::Server& http, const ServerDeps& deps) {
  const ServerDeps* d = &deps;

  http.Get("/v1/components", negotiated([d](const httplib::Request& req, httplib::Response& res) {
             write_json(req, res, 200, d->registry->names());
           }));

  http.Get("/v1/states", negotiated([d](const httplib::Request& req, httplib::Response& res) {
             auto comps = select_components(*d->registry, req.get_param_value("components"));
             if (!comps) return fail(req, res, comps.error());
             nlohmann::json out = nlohmann::json::array();
             for (Component* c : *comps)
               out.push_back({{"component", std::string(c->name())},
                              {"states", to_json(d->scheduler->last_states(*c))}});
             write_json(req, res, 200, out);
           }));

  http.Get("/v1/events", negotiated([d](const httplib::Request& req, httplib::Response& res) {
             auto comps = select_components(*d->registry, req.get_param_value("components"));
             if (!comps) return fail(req, res, comps.error());
             auto w = window_params(req, Clock::now());
             if (!w) return fail(req, res, w.error());
             nlohmann::json out = nlohmann::json::array();
             for (Component* c : *comps) {
               auto events = events_json(*c, *w);
               if (!events) return fail(req, res, events.error());
               out.push_back({{"component", std::string(c->name())},
                              {"startTime", format_rfc3339(w->start)},
                              {"endTime", format_rfc3339(w->end)},
                              {"events", std::move(*events)}});
             }
             write_json(req, res, 200, out);
           }));

  http.Get(
      "/v1/metrics", negotiated([d](const httplib::Request& req, httplib::Response& res) {
        auto comps = select_components(*d->registry, req.get_param_value("components"));
        if (!comps) return fail(req, res, comps.error());
        auto since = since_param(req, Clock::now());
        if (!since) return fail(req, res, since.error());
        nlohmann::json out = nlohmann::json::array();
        for (Component* c : *comps) {
          auto metrics = metrics_json(*d, *c, *since);
          if (!metrics) return fail(req, res, metrics.error());
          out.push_back({{"component", std::string(c->name())}, {"metrics", std::move(*metrics)}});
        }
        write_json(req, res, 200, out);
      }));

  http.Get("/v1/info", negotiated([d](const httplib::Request& req, httplib::Response& res) {
             auto comps = select_components(*d->registry, req.get_param_value("components"));
             if (!comps) return fail(req, res, comps.error());
             auto now = Clock::now();
             auto w = window_params(req, now);
             if (!w) return fail(req, res, w.error());
             auto since = since_param(req, now);
             if (!since) return fail(req, res, since.error());
             nlohmann::json out = nlohmann::json::array();
             for (Component* c : *comps) {
               auto events = events_json(*c, *w);
               if (!events) return fail(req, res, events.error());
               auto metrics = metrics_json(*d, *c, *since);
               if (!metrics) return fail(req, res, metrics.error());
               out.push_back({{"component", std::string(c->name())},
                              {"startTime", format_rfc3339(w->start)},
                              {"endTime", format_rfc3339(w->end)},
                              {"info",
                               {{"states", to_json(d->scheduler->last_states(*c))},
                                {"events", std::move(*events)},
                                {"metrics", std::move(*metrics)}}}});
             }
             write_json(req, res, 200, out);
           }));
}

}  // namespace gpud::server
