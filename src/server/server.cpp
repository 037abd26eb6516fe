#include "server/server.h"

#include <httplib.h>
#include <sys/socket.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <thread>

#include "core/log.h"
#include "server/http_util.h"
#include "server/routes.h"
#include "server/tls.h"

namespace gpud::server {
namespace {

using namespace std::chrono_literals;

constexpr size_t kWorkerThreads = 4;
constexpr time_t kReadTimeoutSec = 10;
constexpr time_t kWriteTimeoutSec = 10;
constexpr time_t kKeepAliveTimeoutSec = 5;
constexpr size_t kMaxPayloadBytes = 1 << 20;

bool is_mutating(const std::string& method) {
  return method == "POST" || method == "PUT" || method == "DELETE" || method == "PATCH";
}

std::string display_address(const ListenAddress& a, int port) {
  bool v6 = a.host.find(':') != std::string::npos;
  return (v6 ? "[" + a.host + "]" : a.host) + ":" + std::to_string(port);
}

void configure(httplib::Server& http, const ServerDeps& deps) {
  // httplib owns and deletes the queue it gets from this factory.
  http.new_task_queue = [] { return new httplib::ThreadPool(kWorkerThreads); };
  http.set_read_timeout(kReadTimeoutSec, 0);
  http.set_write_timeout(kWriteTimeoutSec, 0);
  http.set_keep_alive_timeout(kKeepAliveTimeoutSec);
  http.set_payload_max_length(kMaxPayloadBytes);
  // httplib's default also sets SO_REUSEPORT, which would let a second daemon bind the same port
  // silently.
  http.set_socket_options([](int sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });

  const ServerDeps* d = &deps;
  http.set_pre_routing_handler([d](const httplib::Request& req, httplib::Response& res) {
    // httplib picks the response encoding from this header after the handler ran; the request
    // object is httplib's own (non-const), handed to the handlers as const.
    if (req.has_header("Accept-Encoding")) {
      auto& headers = const_cast<httplib::Request&>(req).headers;
      auto it = headers.find("Accept-Encoding");
      it->second = without_brotli(it->second);
    }
    if (!is_mutating(req.method)) return httplib::Server::HandlerResponse::Unhandled;
    if (authorized(req.remote_addr, req.get_header_value("Authorization"), d->config->admin_token))
      return httplib::Server::HandlerResponse::Unhandled;
    logger("server")->warn("refused {} {} from {}", req.method, req.path, req.remote_addr);
    write_error(req, res, 403,
                d->config->admin_token.empty()
                    ? "mutating requests are accepted from loopback only"
                    : "mutating requests need loopback or a valid Authorization: Bearer token");
    return httplib::Server::HandlerResponse::Handled;
  });

  http.set_exception_handler(
      [](const httplib::Request& req, httplib::Response& res, std::exception_ptr ep) {
        std::string what = "unknown exception";
        try {
          if (ep) std::rethrow_exception(ep);
        } catch (const std::exception& e) {
          what = e.what();
        } catch (...) {
        }
        logger("server")->error("{} {} failed: {}", req.method, req.path, what);
        write_error(req, res, 500, "internal error: " + what);
      });

  // Called for every status >= 400; only fills in a body where the handler (or routing) left none.
  http.set_error_handler(
      httplib::Server::HandlerWithResponse([](const httplib::Request& req, httplib::Response& res) {
        if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
        std::string message = res.status == 404
                                  ? "not found: " + req.path
                                  : "request failed with HTTP status " + std::to_string(res.status);
        write_error(req, res, res.status, message);
        return httplib::Server::HandlerResponse::Handled;
      }));

  http.set_logger([](const httplib::Request& req, const httplib::Response& res) {
    logger("server")->debug("{} {} {} -> {} ({} bytes)", req.remote_addr, req.method, req.path,
                            res.status, res.body.size());
  });

  register_v1_routes(http, deps);
  register_admin_routes(http, deps);
  if (deps.web_enable) register_web_routes(http);
}

}  // namespace

struct Server::Runner {
  std::thread thread;
  std::atomic<bool> done{false};
};

Server::Server(ServerDeps deps) : deps_(std::move(deps)) {}

Server::~Server() { stop(); }

Result<void> Server::start() {
  if (http_) return make_error("server already started");
  if (deps_.config == nullptr || deps_.registry == nullptr || deps_.scheduler == nullptr)
    return make_error("server needs a config, a registry and a scheduler");
  auto addr = parse_listen_address(deps_.config->listen_address);
  if (!addr) return addr.error();

  std::unique_ptr<httplib::Server> http;
  std::string tls_source;
  if (deps_.config->no_tls) {
    http = std::make_unique<httplib::Server>();
  } else {
    auto material = resolve_tls_material(*deps_.config);
    if (!material) return material.error();
    auto tls = make_tls_server(*material);
    if (!tls) return tls.error();
    http = std::move(*tls);
    tls_source = material->source;
  }
  configure(*http, deps_);

  errno = 0;
  int port = addr->port == 0 ? http->bind_to_any_port(addr->host)
                             : (http->bind_to_port(addr->host, addr->port) ? addr->port : -1);
  if (port < 0) {
    int err = errno;
    return make_error("cannot listen on " + display_address(*addr, addr->port) + ": " +
                      (err != 0 ? std::strerror(err) : "address in use or not available"));
  }

  http_ = std::move(http);
  port_ = port;
  runner_ = std::make_unique<Runner>();
  httplib::Server* srv = http_.get();
  Runner* runner = runner_.get();
  runner_->thread = std::thread([srv, runner] {
    srv->listen_after_bind();
    runner->done = true;
  });
  // stop() may only be called once httplib considers itself running.
  for (int i = 0; i < 500 && !http_->is_running() && !runner_->done; ++i)
    std::this_thread::sleep_for(2ms);

  logger("server")->info("serving {} on {}{}", deps_.config->no_tls ? "http" : "https",
                         display_address(*addr, port_),
                         tls_source.empty() ? "" : " (certificate: " + tls_source + ")");
  return {};
}

void Server::stop() {
  if (!http_) return;
  // httplib ignores stop() before its accept loop runs, so wait until it does (or has already
  // ended).
  while (!runner_->done) {
    if (http_->is_running()) {
      http_->stop();
      break;
    }
    std::this_thread::sleep_for(2ms);
  }
  if (runner_->thread.joinable()) runner_->thread.join();
  runner_.reset();
  http_.reset();
  logger("server")->debug("stopped");
}

int Server::port() const { return port_; }

}  // namespace gpud::server
