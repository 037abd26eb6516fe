// Server: the HTTP(S) API on port 15132 (GPUd's paths and JSON shapes), /metrics, and set-healthy.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "core/config.h"
#include "core/event_log.h"
#include "core/metric_history.h"
#include "core/metrics.h"
#include "core/registry.h"
#include "core/result.h"
#include "core/scheduler.h"
#include "core/triggered_checks.h"

namespace httplib {
class Server;
}

namespace gpud::server {

struct ServerDeps {
  const Config* config = nullptr;
  const Registry* registry = nullptr;
  Scheduler* scheduler = nullptr;
  EventLog* events = nullptr;
  MetricHistory* history = nullptr;
  MetricRegistry* metrics = nullptr;
  // Returns the /machine-info document (cached by the caller; must not do slow I/O per request).
  std::function<nlohmann::json()> machine_info;
  // POST /inject-fault's work, given by app/ (the server knows no kernel log): parse GPUd's
  // fault-injector request and write its line; returns the line written, or an error whose code
  // is the HTTP status (400 for a bad request). Unset: the endpoint answers 501.
  std::function<Result<std::string>(const nlohmann::json& body)> inject_fault;
  // GET /v1/gpus: each GPU's health over the components' latest states (components::gpu_health),
  // from caches only. Unset: the endpoint answers 501.
  std::function<nlohmann::json()> gpus = nullptr;
  // Run before GET /metrics renders: brings the series computed from other state (the per-GPU
  // health, from the components' latest states) up to date, so that a scrape never pairs a
  // component's new health with a GPU's old one. Unset: nothing.
  std::function<void()> before_metrics = nullptr;
  // GET /v1/plugins: the specs of the custom plugins registered now (app/ knows the plugins).
  // Unset: an empty list.
  std::function<nlohmann::json()> plugins = nullptr;
  // How long trigger-check and trigger-tag wait for their checks before answering 202 with the
  // checks still running (which go on, and which a later trigger joins).
  std::chrono::milliseconds trigger_wait{10000};
  // After set-healthy acknowledged a component: record what it acknowledged of the kernel log
  // (a KernelLogWatermark, kept across restarts; app/ knows the kernel log and the store). Unset:
  // nothing is recorded beyond the events' acknowledgement.
  std::function<Result<void>(std::string_view component, const Acknowledgement& ack)>
      acknowledge_kernel_log = nullptr;
  // Serve the local web UI (web/, embedded in the binary) at / (`gpud run --web-enable`).
  bool web_enable = true;
};

class Server {
 public:
  explicit Server(ServerDeps deps);
  ~Server();
  // Binds config->listen_address (TLS unless config->no_tls; self-signed cert created in the data
  // dir on first start unless tls_cert/tls_key are given) and, when config->api_socket is set, a
  // plain-HTTP Unix socket there (mode 0600, in a directory of mode 0700 owned by this user) whose
  // peers may make mutating requests; serves both on background threads. Errors: bad address,
  // port in use, unreadable certificate, a socket path that cannot be served safely.
  Result<void> start();
  void stop();
  int port() const;  // the bound port (useful with ":0")

 private:
  ServerDeps deps_;
  struct Listener;
  std::unique_ptr<Listener> tcp_;
  std::unique_ptr<Listener> local_;  // the Unix socket, when configured
  // Runs triggered checks for both listeners; stopped after them.
  std::unique_ptr<TriggeredChecks> triggers_;
  int port_ = 0;
};

}  // namespace gpud::server
