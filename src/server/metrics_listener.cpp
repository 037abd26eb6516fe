#include "server/metrics_listener.h"

#include <httplib.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include "core/log.h"
#include "server/http_util.h"
#include "server/serving_thread.h"

namespace gpud::server {

struct MetricsListener::Impl : ServingThread {};

MetricsListener::MetricsListener(const MetricRegistry& metrics) : metrics_(metrics) {}

MetricsListener::~MetricsListener() { stop(); }

Result<void> MetricsListener::start(const std::string& address) {
  if (impl_) return make_error("metrics listener already started");
  auto addr = parse_listen_address(address);
  if (!addr) return make_error("--metrics-listen-address: " + addr.error().message);
  auto impl = std::make_unique<Impl>();
  impl->http = std::make_unique<httplib::Server>();
  httplib::Server& http = *impl->http;
  // Scrapes are rare and small: one worker, short timeouts, no request bodies.
  http.new_task_queue = [] { return new httplib::ThreadPool(1); };
  http.set_read_timeout(5, 0);
  http.set_write_timeout(5, 0);
  http.set_keep_alive_timeout(5);
  http.set_payload_max_length(0);
  http.set_tcp_nodelay(true);  // see server.cpp: no 40 ms wait for a delayed ACK
  http.set_socket_options([](int sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });
  const MetricRegistry* metrics = &metrics_;
  http.Get("/metrics", [metrics](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics->prometheus_text(), "text/plain; version=0.0.4; charset=utf-8");
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
  port_ = port;
  impl->serve();
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
