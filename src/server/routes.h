// The API's routes, registered on an httplib::Server: GPUd's paths and JSON shapes over the
// registry, the scheduler's cached states, the event log and the metric history. Handlers never run
// a check themselves: trigger-check and trigger-tag hand theirs to TriggeredChecks' pool and wait
// a bounded time.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <string_view>
#include <vector>

#include "core/registry.h"
#include "core/result.h"
#include "core/triggered_checks.h"
#include "server/http_util.h"
#include "server/server.h"

namespace httplib {
struct Request;
struct Response;
}  // namespace httplib

namespace gpud::server {

// /v1/events and /v1/metrics answer at most this many rows (events, samples) at a time, and by
// default this many: a long history comes in pages.
inline constexpr size_t kMaxPageRows = 10000;
// The response header that holds the next page's cursor (absent on the last page).
inline constexpr std::string_view kNextCursorHeader = "X-Gpud-Next-Cursor";
// /v1/info's response header naming what its limit cut ("events", "metrics", "events, metrics").
inline constexpr std::string_view kTruncatedHeader = "X-Gpud-Truncated";

using Handler = std::function<void(const httplib::Request&, httplib::Response&)>;

// /v1/components, /v1/states, /v1/events, /v1/metrics, /v1/info.
void register_v1_routes(httplib::Server& http, const ServerDeps& deps);

// How one listener's trigger routes run checks and tell who may run custom code.
struct TriggerRouting {
  TriggeredChecks* checks = nullptr;  // shared by the listeners, so that their triggers join
  // Requests of this listener that may wait for their checks at once; the others answer at once
  // with what has finished. Fewer than the listener's workers: triggers never hold them all.
  size_t max_waiting = 1;
  std::chrono::milliseconds wait{0};  // how long a request waits for its checks at most
  // authorize_mutation for this listener's peers (logging refusals as the listener does).
  std::function<Authorization(const httplib::Request&)> authorize;
};
// GET /v1/components/trigger-check and /v1/components/trigger-tag. A custom plugin's check runs
// only for a peer that may mutate (root on loopback, the Unix socket, the admin token); built-in
// components' checks for anyone, as in GPUd. Every check runs on routing.checks' pool.
void register_trigger_routes(httplib::Server& http, const ServerDeps& deps, TriggerRouting routing);
// /healthz, /machine-info, /metrics, POST /v1/health-states/set-healthy.
void register_admin_routes(httplib::Server& http, const ServerDeps& deps);
// GET / and /assets/*: the local web UI embedded in the binary (only when config->web_enable).
void register_web_routes(httplib::Server& http);

// Answers an error: its code when that is an HTTP error status, else 500.
void fail(const httplib::Request& req, httplib::Response& res, const Error& e);

// Wraps a read endpoint with GPUd's content negotiation (400 on an unsupported Content-Type).
Handler negotiated(Handler h);

// Resolves ?components=a,b: empty means every supported component; an unknown name is Error{code
// 404}; a registered but unsupported component is skipped, as GPUd hides those.
[[nodiscard]] Result<std::vector<Component*>> select_components(const Registry& registry,
                                                                std::string_view param);

}  // namespace gpud::server
