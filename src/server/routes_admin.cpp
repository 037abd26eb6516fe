#include <httplib.h>

#include <algorithm>
#include <exception>
#include <string>

#include "core/log.h"
#include "server/http_util.h"
#include "server/routes.h"

namespace gpud::server {
namespace {

nlohmann::json set_healthy_body(int code, std::string_view message, nlohmann::json successful,
                                nlohmann::json failed) {
  return {{"code", code},
          {"message", std::string(message)},
          {"successful", std::move(successful)},
          {"failed", std::move(failed)}};
}

void set_healthy(const ServerDeps& d, const httplib::Request& req, httplib::Response& res) {
  auto names = split_list(req.get_param_value("components"));
  std::vector<Component*> targets;
  if (names.empty()) {
    for (Component* c : d.registry->supported())
      if (c->can_set_healthy()) targets.push_back(c);
  } else {
    for (const auto& n : names) {
      Component* c = d.registry->find(n);
      if (c == nullptr) {
        write_json(req, res, 404,
                   set_healthy_body(404, "component not found: " + n, nlohmann::json::array(),
                                    nlohmann::json::object()));
        return;
      }
      if (std::find(targets.begin(), targets.end(), c) == targets.end()) targets.push_back(c);
    }
  }

  nlohmann::json successful = nlohmann::json::array();
  nlohmann::json failed = nlohmann::json::object();
  // The server put the principal it allowed in this header (and removed any a client sent).
  std::string by = req.get_header_value(kPrincipalHeader);
  const Acknowledgement ack{Clock::now(), by.empty() ? "unknown" : by};
  for (Component* c : targets) {
    std::string name(c->name());
    if (!c->supported()) {
      failed[name] = "component is not supported on this host";
      continue;
    }
    if (!c->can_set_healthy()) {
      failed[name] = "component does not support set-healthy";
      continue;
    }
    auto r = c->set_healthy(ack);
    if (r && d.acknowledge_kernel_log) r = d.acknowledge_kernel_log(name, ack);
    if (!r) {
      failed[name] = r.error().message;
      continue;
    }
    successful.push_back(name);
    // Re-evaluate now, so the cached state reflects the purge instead of waiting for the interval.
    d.scheduler->trigger(name);
    logger("server")->info("set-healthy {} from {} ({})", name, describe_peer(req), ack.by);
  }
  if (successful.empty() && !failed.empty()) {
    write_json(req, res, 400,
               set_healthy_body(400, "set healthy failed for every requested component",
                                std::move(successful), std::move(failed)));
    return;
  }
  write_json(req, res, 200,
             set_healthy_body(200, "set healthy states completed", std::move(successful),
                              std::move(failed)));
}

}  // namespace

void register_admin_routes(httplib::Server& http, const ServerDeps& deps) {
  const ServerDeps* d = &deps;

  http.Get("/healthz", [](const httplib::Request& req, httplib::Response& res) {
    write_json(req, res, 200, {{"status", "ok"}, {"version", "v1"}});
  });

  http.Get("/machine-info", [d](const httplib::Request& req, httplib::Response& res) {
    if (!d->machine_info) return write_error(req, res, 500, "machine info is not available");
    nlohmann::json info;
    try {
      info = d->machine_info();
    } catch (const std::exception& e) {
      return write_error(req, res, 500, std::string("failed to get machine info: ") + e.what());
    }
    write_json(req, res, 200, info);
  });

  http.Get("/metrics", [d](const httplib::Request&, httplib::Response& res) {
    if (d->before_metrics) d->before_metrics();
    res.status = 200;
    set_body(res, d->metrics != nullptr ? d->metrics->prometheus_text() : std::string(),
             kPrometheusContentType);
  });

  // GPUd's fault injector: writes the fault's kernel-log line. Only with --enable-fault-injection
  // (a forged Xid gets a node drained), and like every POST only for root or the admin token.
  http.Post("/inject-fault", [d](const httplib::Request& req, httplib::Response& res) {
    if (!d->config->enable_fault_injection)
      return write_error(req, res, 403,
                         "fault injection is disabled; start the daemon with "
                         "--enable-fault-injection to allow it");
    if (!d->inject_fault)
      return write_error(req, res, 501, "fault injection is not available in this process");
    auto body = nlohmann::json::parse(req.body, nullptr, false);
    if (body.is_discarded()) return write_error(req, res, 400, "invalid JSON body");
    auto written = d->inject_fault(body);
    if (!written)
      return write_error(req, res, written.error().code == 400 ? 400 : 500,
                         written.error().message);
    logger("server")->info("fault injected from {}: {}", describe_peer(req), *written);
    write_json(req, res, 200, {{"message", "fault injected"}});
  });

  http.Post(
      "/v1/health-states/set-healthy",
      [d](const httplib::Request& req, httplib::Response& res) { set_healthy(*d, req, res); });
}

}  // namespace gpud::server
