#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/json.h"
#include "server/http_util.h"
#include "server/routes.h"

namespace gpud::server {
namespace {

// trigger-check's and trigger-tag's components: the one named by componentName, or every supported
// one carrying tagName. Unknown names, unsupported components and tags nothing carries are 404s;
// neither parameter is a 400.
Result<std::vector<Component*>> components_to_check(const Registry& registry,
                                                    const httplib::Request& req, bool tag_only) {
  const std::string name = tag_only ? "" : req.get_param_value("componentName");
  const std::string tag = req.get_param_value("tagName");
  if (!name.empty()) {
    Component* c = registry.find(name);
    if (c == nullptr) return make_error("component not found: " + name, 404);
    if (!c->supported()) return make_error("component not supported on this machine: " + name, 404);
    return std::vector<Component*>{c};
  }
  if (tag.empty())
    return make_error(tag_only ? "tagName is required" : "componentName or tagName is required",
                      400);
  std::vector<Component*> out;
  for (Component* c : registry.supported()) {
    auto tags = c->tags();
    if (std::find(tags.begin(), tags.end(), tag) != tags.end()) out.push_back(c);
  }
  if (out.empty()) return make_error("no supported component has tag " + tag, 404);
  return out;
}

// A custom plugin runs a script the operator wrote, as the daemon's user: running it on demand is a
// mutating request. Custom plugins are exactly the components that can be deregistered.
bool is_custom_plugin(const Component& c) { return c.can_deregister(); }

// The checks a request triggered, in the order of its components: each one's result, or nullopt
// while it still runs.
struct Triggered {
  std::vector<Component*> components;
  std::vector<std::optional<CheckResult>> results;
  bool finished() const {
    return std::all_of(results.begin(), results.end(), [](const auto& r) { return r.has_value(); });
  }
};

class TriggerRoutes {
 public:
  explicit TriggerRoutes(const ServerDeps& deps, TriggerRouting routing)
      : deps_(deps), routing_(std::move(routing)) {}

  // Selects the components, refuses custom plugins to a peer who may not mutate, triggers every
  // check (joining runs already under way) and waits for them: up to routing_.wait, and only
  // while fewer than routing_.max_waiting requests of this listener wait (the others answer at
  // once), so that triggers never hold all the listener's workers.
  Result<Triggered> run(const httplib::Request& req, bool tag_only) {
    auto comps = components_to_check(*deps_.registry, req, tag_only);
    if (!comps) return comps.error();
    for (Component* c : *comps) {
      if (!is_custom_plugin(*c)) continue;
      Authorization auth = routing_.authorize(req);
      if (!auth.allowed)
        return make_error("running custom plugin " + std::string(c->name()) +
                              " is a mutating request; " + auth.refusal,
                          403);
      break;
    }
    std::vector<TriggeredChecks::Run> runs;
    for (Component* c : *comps) {
      auto r = routing_.checks->trigger(*c);
      if (!r) return r.error();
      runs.push_back(std::move(*r));
    }
    if (waiting_.fetch_add(1) < routing_.max_waiting)
      (void)routing_.checks->wait(runs, std::chrono::steady_clock::now() + routing_.wait);
    waiting_.fetch_sub(1);
    Triggered out{std::move(*comps), {}};
    for (const auto& r : runs)
      out.results.push_back(r.wait_for(std::chrono::seconds(0)) == std::future_status::ready
                                ? std::optional<CheckResult>(r.get())
                                : std::nullopt);
    return out;
  }

 private:
  const ServerDeps& deps_;
  TriggerRouting routing_;
  std::atomic<size_t> waiting_{0};
};

// A check that is still running: Initializing, since no result of this run exists yet.
std::vector<HealthState> still_running(const Component& c) {
  return single_state(c.name(), Health::kInitializing,
                      "the triggered check is still running; its result will be in /v1/states, "
                      "and a trigger sent while it runs joins it and waits for it")
      .states;
}

}  // namespace

void register_trigger_routes(httplib::Server& http, const ServerDeps& deps,
                             TriggerRouting routing) {
  auto routes = std::make_shared<TriggerRoutes>(deps, std::move(routing));

  // Runs the checks now and answers their fresh states (GPUd's shape); 202 with an Initializing
  // state for each check still running when the wait ended.
  http.Get("/v1/components/trigger-check",
           negotiated([routes](const httplib::Request& req, httplib::Response& res) {
             auto t = routes->run(req, false);
             if (!t) return fail(req, res, t.error());
             nlohmann::json out = nlohmann::json::array();
             for (size_t i = 0; i < t->components.size(); ++i) {
               const Component& c = *t->components[i];
               const auto& r = t->results[i];
               out.push_back({{"component", std::string(c.name())},
                              {"states", to_json(r ? r->states : still_running(c))}});
             }
             write_json(req, res, t->finished() ? 200 : 202, out);
           }));

  // Runs every check of a tag now: {"components":[names],"exit":0|1,"success":bool}; exit 1 (and
  // success false) when any of them is not Healthy. 202 with "pending":[names] (and exit 1) when
  // some still run when the wait ended.
  http.Get("/v1/components/trigger-tag",
           negotiated([routes](const httplib::Request& req, httplib::Response& res) {
             auto t = routes->run(req, true);
             if (!t) return fail(req, res, t.error());
             nlohmann::json names = nlohmann::json::array();
             nlohmann::json pending = nlohmann::json::array();
             bool healthy = true;
             for (size_t i = 0; i < t->components.size(); ++i) {
               std::string name(t->components[i]->name());
               const auto& r = t->results[i];
               healthy = healthy && r && r->health() == Health::kHealthy;
               if (!r) pending.push_back(name);
               names.push_back(std::move(name));
             }
             nlohmann::json out = {
                 {"components", names}, {"exit", healthy ? 0 : 1}, {"success", healthy}};
             if (!pending.empty()) out["pending"] = pending;
             write_json(req, res, pending.empty() ? 200 : 202, out);
           }));
}

}  // namespace gpud::server
