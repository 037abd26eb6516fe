#include "server/metrics_listener.h"

#include <httplib.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include "core/log.h"
#include "server/connection_loop.h"
#include "server/http_util.h"

namespace gpud::server {

struct MetricsListener::Impl : ConnectionLoop {
  using ConnectionLoop::ConnectionLoop;
};

namespace {

// Scrapes are rare and small: one worker, a few connections, no request bodies. No per-peer cap:
// a scraper often shares its address with other pods (a node's address, a NAT), and a full table
// makes room by closing its longest-waiting connection. Any other method is answered 405, and a
// request with a body 413, before the body, so that no request holds the worker waiting for one.
ConnectionLimits scrape_limits() {
  ConnectionLimits l;
  l.workers = 1;
  l.max_connections = 64;
  l.max_connections_per_peer = 0;
  l.methods = {"GET", "HEAD"};
  l.request_timeout = std::chrono::seconds(5);
  l.max_body_bytes = 0;
  l.worker_reads_bodies = false;
  return l;
}

}  // namespace

MetricsListener::MetricsListener(const MetricRegistry& metrics,
                                 std::function<void()> before_metrics)
    : metrics_(metrics), before_metrics_(std::move(before_metrics)) {}

MetricsListener::~MetricsListener() { stop(); }

Result<void> MetricsListener::start(const std::string& address) {
  if (impl_) return make_error("metrics listener already started");
  auto addr = parse_listen_address(address);
  if (!addr) return make_error("--metrics-listen-address: " + addr.error().message);
  auto handler = std::make_unique<RequestHandler>();
  RequestHandler& http = *handler;
  const ConnectionLimits limits = scrape_limits();
  // For the Keep-Alive header only: the connection loop enforces both.
  http.set_keep_alive_timeout(
      std::chrono::duration_cast<std::chrono::seconds>(limits.idle_timeout).count());
  http.set_keep_alive_max_count(limits.max_requests_per_connection);
  http.set_payload_max_length(0);
  http.set_socket_options([](int sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });
  const MetricRegistry* metrics = &metrics_;
  const std::function<void()>* before = &before_metrics_;
  http.Get("/metrics", [metrics, before](const httplib::Request&, httplib::Response& res) {
    if (*before) (*before)();
    set_body(res, metrics->prometheus_text(), kPrometheusContentType);
  });
  // Everything else, whatever the method: this listener has no API.
  http.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    write_error(req, res, 404,
                "this listener serves GET /metrics only; the API is on --listen-address");
  });
  errno = 0;
  const int port = addr->port == 0 ? http.bind_to_any_port(addr->host)
                                   : (http.bind_to_port(addr->host, addr->port) ? addr->port : -1);
  if (port < 0) {
    const int err = errno;
    return make_error("cannot listen on " + address + " (--metrics-listen-address): " +
                      (err != 0 ? std::strerror(err) : "address in use or not available"));
  }
  auto impl = std::make_unique<Impl>(std::move(handler), nullptr, limits, address);
  if (auto r = impl->start(); !r) return make_error("cannot serve /metrics: " + r.error().message);
  port_ = port;
  impl_ = std::move(impl);
  logger("server")->info("serving /metrics over plain http on {} (port {})", address, port_);
  return {};
}

void MetricsListener::stop() {
  if (!impl_) return;
  impl_->stop();
  impl_.reset();
}

}  // namespace gpud::server
