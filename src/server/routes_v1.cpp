#include <httplib.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "core/json.h"
#include "core/log.h"
#include "core/parse_number.h"
#include "core/strings.h"
#include "core/time_util.h"
#include "server/http_util.h"
#include "server/query_params.h"
#include "server/routes.h"

namespace gpud::server {

void fail(const httplib::Request& req, httplib::Response& res, const Error& e) {
  write_error(req, res, e.code >= 400 && e.code < 600 ? e.code : 500, e.message);
}

namespace {

using namespace std::chrono_literals;

// Fills one page: the components from where the cursor stopped, each from its offset, at most
// paging.limit rows in all; returns where the next page starts, if anything is left.
// fetch(component, offset, n) reads up to n rows; emit(component, rows) adds a component's entry.
template <typename Row>
Result<std::optional<PageCursor>> fill_page(
    const std::vector<Component*>& comps, const Paging& paging, int64_t until_ms,
    const std::function<Result<std::vector<Row>>(const Component&, size_t, size_t)>& fetch,
    const std::function<void(const Component&, std::vector<Row>)>& emit) {
  size_t first = 0;
  size_t offset = 0;
  if (paging.cursor) {
    auto it = std::find_if(comps.begin(), comps.end(),
                           [&](Component* c) { return c->name() == paging.cursor->component; });
    if (it == comps.end())
      return make_error("the cursor continues component " + paging.cursor->component +
                            ", which this request does not select; repeat the first page's "
                            "parameters with the cursor",
                        400);
    first = static_cast<size_t>(it - comps.begin());
    offset = paging.cursor->offset;
  }
  size_t remaining = paging.limit;
  for (size_t i = first; i < comps.size(); ++i, offset = 0) {
    // One row more than fits tells whether the component goes on.
    auto rows = fetch(*comps[i], offset, remaining + 1);
    if (!rows) return rows.error();
    if (rows->size() > remaining) {
      rows->erase(rows->begin() + static_cast<std::ptrdiff_t>(remaining), rows->end());
      if (!rows->empty()) emit(*comps[i], std::move(*rows));
      return std::optional<PageCursor>(
          PageCursor{until_ms, offset + remaining, std::string(comps[i]->name())});
    }
    remaining -= rows->size();
    emit(*comps[i], std::move(*rows));
  }
  return std::optional<PageCursor>();
}

Result<std::vector<Event>> read_events(const ServerDeps& deps, const Component& c, TimePoint start,
                                       TimePoint end, size_t offset, size_t n) {
  // The API reads the event log in pages. Without one (a test's bare server), the component's own
  // events, sliced.
  auto events = deps.events != nullptr ? deps.events->query_page(c.name(), start, end, offset, n)
                                       : c.events(start, end);
  if (!events)
    return make_error(
        "failed to read events of " + std::string(c.name()) + ": " + events.error().message, 500);
  if (deps.events == nullptr) {
    std::vector<Event> page;
    for (size_t i = offset; i < events->size() && page.size() < n; ++i)
      page.push_back(std::move((*events)[i]));
    return page;
  }
  return events;
}

Result<std::vector<MetricSample>> read_metrics(const ServerDeps& deps, const Component& c,
                                               TimePoint since, TimePoint until, size_t offset,
                                               size_t n) {
  if (deps.history == nullptr) return std::vector<MetricSample>{};
  auto samples = deps.history->query_page(c.name(), since, until, offset, n);
  if (!samples)
    return make_error(
        "failed to read metrics of " + std::string(c.name()) + ": " + samples.error().message, 500);
  return samples;
}

nlohmann::json metrics_array(const std::vector<MetricSample>& samples) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& s : samples) out.push_back(to_json(s));
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

  // Deregisters a custom plugin (GPUd's shape); built-in components refuse with 400. A mutating
  // request: authorized like every DELETE (server.cpp).
  http.Delete("/v1/components", [d](const httplib::Request& req, httplib::Response& res) {
    const std::string name = req.get_param_value("componentName");
    if (name.empty()) return fail(req, res, make_error("componentName is required", 400));
    if (auto r = d->scheduler->deregister(name); !r) return fail(req, res, r.error());
    logger("server")->info("deregistered component {} for {}", escape_for_log(name),
                           describe_peer(req));
    write_json(req, res, 200,
               {{"code", 200}, {"message", "component deregistered"}, {"component", name}});
  });

  http.Get("/v1/plugins", negotiated([d](const httplib::Request& req, httplib::Response& res) {
             write_json(req, res, 200, d->plugins ? d->plugins() : nlohmann::json::array());
           }));

  // The last /v1/states answer, served again while the same components are asked for and no
  // cached state changed (Scheduler::generation): polling clients cost a copy, not a rebuild.
  struct StatesAnswer {
    std::mutex mu;
    std::optional<uint64_t> generation;
    std::string components;  // the selected components' names, comma-terminated
    std::string body;
  };
  auto last_answer = std::make_shared<StatesAnswer>();
  http.Get("/v1/states",
           negotiated([d, last_answer](const httplib::Request& req, httplib::Response& res) {
             auto comps = select_components(*d->registry, req.get_param_value("components"));
             if (!comps) return fail(req, res, comps.error());
             const bool indent = json_indent_requested(req);
             std::string names;
             for (Component* c : *comps) names.append(c->name()).push_back(',');
             // Read before the states: a change that lands while the answer is built leaves it
             // tagged with the older generation, so the next request builds afresh.
             const uint64_t generation = d->scheduler->generation();
             if (!indent) {
               std::lock_guard lock(last_answer->mu);
               if (last_answer->generation == generation && last_answer->components == names) {
                 res.status = 200;
                 res.set_content(last_answer->body, "application/json");
                 return;
               }
             }
             nlohmann::json out = nlohmann::json::array();
             // interval_seconds (gpud's): how often the states are renewed, so that a client can
             // tell a stale state (older than two intervals) from a live one.
             for (Component* c : *comps)
               out.push_back({{"component", std::string(c->name())},
                              {"interval_seconds", c->interval().count()},
                              {"states", to_json(d->scheduler->last_states(*c))}});
             write_json(req, res, 200, out);
             if (!indent) {
               std::lock_guard lock(last_answer->mu);
               last_answer->generation = generation;
               last_answer->components = std::move(names);
               last_answer->body = res.body;
             }
           }));

  http.Get("/v1/gpus", negotiated([d](const httplib::Request& req, httplib::Response& res) {
             if (!d->gpus)
               return fail(req, res, make_error("per-GPU health is not available", 501));
             write_json(req, res, 200, d->gpus());
           }));

  http.Get("/v1/events", negotiated([d](const httplib::Request& req, httplib::Response& res) {
             auto comps = select_components(*d->registry, req.get_param_value("components"));
             if (!comps) return fail(req, res, comps.error());
             auto w = window_params(req, Clock::now());
             if (!w) return fail(req, res, w.error());
             auto paging = paging_params(req);
             if (!paging) return fail(req, res, paging.error());
             if (paging->cursor) w->end = from_unix_ms(paging->cursor->until_ms);
             nlohmann::json out = nlohmann::json::array();
             auto next = fill_page<Event>(
                 *comps, *paging, to_unix_ms(w->end),
                 [&](const Component& c, size_t offset, size_t n) {
                   return read_events(*d, c, w->start, w->end, offset, n);
                 },
                 [&](const Component& c, std::vector<Event> events) {
                   out.push_back({{"component", std::string(c.name())},
                                  {"startTime", format_rfc3339(w->start)},
                                  {"endTime", format_rfc3339(w->end)},
                                  {"events", to_json(events)}});
                 });
             if (!next) return fail(req, res, next.error());
             if (*next) res.set_header(std::string(kNextCursorHeader), format_cursor(**next));
             write_json(req, res, 200, out);
           }));

  http.Get("/v1/metrics", negotiated([d](const httplib::Request& req, httplib::Response& res) {
             auto comps = select_components(*d->registry, req.get_param_value("components"));
             if (!comps) return fail(req, res, comps.error());
             const TimePoint now = Clock::now();
             auto since = since_param(req, now);
             if (!since) return fail(req, res, since.error());
             auto paging = paging_params(req);
             if (!paging) return fail(req, res, paging.error());
             const TimePoint until = paging->cursor ? from_unix_ms(paging->cursor->until_ms) : now;
             nlohmann::json out = nlohmann::json::array();
             auto next = fill_page<MetricSample>(
                 *comps, *paging, to_unix_ms(until),
                 [&](const Component& c, size_t offset, size_t n) {
                   return read_metrics(*d, c, *since, until, offset, n);
                 },
                 [&](const Component& c, std::vector<MetricSample> samples) {
                   out.push_back(
                       {{"component", std::string(c.name())}, {"metrics", metrics_array(samples)}});
                 });
             if (!next) return fail(req, res, next.error());
             if (*next) res.set_header(std::string(kNextCursorHeader), format_cursor(**next));
             write_json(req, res, 200, out);
           }));

  // Events and metrics each at most `limit` rows in all (no cursor: /v1/events and /v1/metrics
  // page); X-Gpud-Truncated names what was cut.
  http.Get("/v1/info", negotiated([d](const httplib::Request& req, httplib::Response& res) {
             auto comps = select_components(*d->registry, req.get_param_value("components"));
             if (!comps) return fail(req, res, comps.error());
             auto now = Clock::now();
             auto w = window_params(req, now);
             if (!w) return fail(req, res, w.error());
             auto since = since_param(req, now);
             if (!since) return fail(req, res, since.error());
             auto paging = paging_params(req);
             if (!paging) return fail(req, res, paging.error());
             size_t events_left = paging->limit;
             size_t metrics_left = paging->limit;
             std::vector<std::string> truncated;
             auto cut = [&](auto& rows, size_t& left, const char* what) {
               if (rows.size() > left) {
                 rows.erase(rows.begin() + static_cast<std::ptrdiff_t>(left), rows.end());
                 if (std::find(truncated.begin(), truncated.end(), what) == truncated.end())
                   truncated.emplace_back(what);
               }
               left -= rows.size();
             };
             nlohmann::json out = nlohmann::json::array();
             for (Component* c : *comps) {
               auto events = read_events(*d, *c, w->start, w->end, 0, events_left + 1);
               if (!events) return fail(req, res, events.error());
               cut(*events, events_left, "events");
               auto metrics = read_metrics(*d, *c, *since, now, 0, metrics_left + 1);
               if (!metrics) return fail(req, res, metrics.error());
               cut(*metrics, metrics_left, "metrics");
               out.push_back({{"component", std::string(c->name())},
                              {"startTime", format_rfc3339(w->start)},
                              {"endTime", format_rfc3339(w->end)},
                              {"info",
                               {{"states", to_json(d->scheduler->last_states(*c))},
                                {"events", to_json(*events)},
                                {"metrics", metrics_array(*metrics)}}}});
             }
             if (!truncated.empty())
               res.set_header(std::string(kTruncatedHeader), join(truncated, ", "));
             write_json(req, res, 200, out);
           }));
}

}  // namespace gpud::server
