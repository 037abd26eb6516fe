#include "server/server.h"

#include <httplib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>

#include "core/log.h"
#include "host/host_fs.h"
#include "host/tcp_sockets.h"
#include "server/connection_loop.h"
#include "server/http_util.h"
#include "server/routes.h"
#include "server/tls.h"

namespace gpud::server {
namespace {

using namespace std::chrono_literals;

constexpr size_t kMaxPayloadBytes = 1 << 20;
// Bodies the connection thread reads ahead, before a worker takes the request; a larger one is
// read by the worker (after the authorization that a mutating request needs), so that waiting
// connections hold little memory.
constexpr size_t kReadAheadBodyBytes = 64 << 10;
// Threads that run triggered checks (trigger-check, trigger-tag), apart from the scheduler's and
// the API's.
constexpr size_t kTriggerWorkers = 2;
// A refused request is logged at most this often (the first at once), with the count left out.
constexpr auto kRefusalLogInterval = 10s;

// Answered on the connection loop itself: /healthz builds its answer from nothing.
const std::vector<std::string> kInlinePaths = {"/healthz"};

// The API's TCP listener: 4 workers serve requests that have fully arrived; waiting connections
// hold none.
ConnectionLimits tcp_limits() {
  ConnectionLimits l;
  l.workers = 4;
  l.max_body_bytes = kReadAheadBodyBytes;
  l.inline_paths = kInlinePaths;
  // Room for the liveness probe and the local CLI over TCP however many connections other
  // addresses hold.
  l.reserved_for_local = 16;
  // A keep-alive client reconnects after this many requests. Each reconnect is a TLS handshake on
  // the loop thread (about a millisecond of ECDSA and ECDH that every other connection waits
  // out): at 1,000 a busy client shook hands dozens of times a second, and those waits were the
  // API's p99 (make bench: 7 ms at 32 connections, 2-3 ms at 100,000).
  l.max_requests_per_connection = 100000;
  return l;
}

// The Unix socket: the local CLI only, whose peers are root and the daemon's user.
ConnectionLimits local_socket_limits() {
  ConnectionLimits l;
  l.workers = 2;
  l.max_connections = 64;
  l.max_connections_per_peer = 0;
  l.tcp_nodelay = false;
  l.max_body_bytes = kReadAheadBodyBytes;
  l.inline_paths = kInlinePaths;
  return l;
}

bool is_mutating(const std::string& method) {
  return method == "POST" || method == "PUT" || method == "DELETE" || method == "PATCH";
}

std::string display_address(const ListenAddress& a, int port) {
  bool v6 = a.host.find(':') != std::string::npos;
  return (v6 ? "[" + a.host + "]" : a.host) + ":" + std::to_string(port);
}

Peer local_socket_peer(const httplib::Request& req) {
  Peer p;
  p.local_socket = true;
  p.address = describe_peer(req);
  return p;
}

// A TCP peer's uid, from the socket tables when it is on loopback (only there is its socket in this
// host's tables).
Peer tcp_peer(const httplib::Request& req, const std::string& host_root) {
  Peer p;
  p.address = describe_peer(req);
  if (!is_loopback(req.remote_addr)) {
    p.unknown_uid_reason = "not a loopback address";
    return p;
  }
  auto client = host::make_tcp_endpoint(req.remote_addr, req.remote_port);
  auto server = host::make_tcp_endpoint(req.local_addr, req.local_port);
  if (!client || !server) {
    p.unknown_uid_reason = "unexpected connection addresses " + req.remote_addr + " / " +
                           req.local_addr + ":" + std::to_string(req.local_port);
    return p;
  }
  auto uid = host::tcp_socket_owner(host::HostFs(host_root), *client, *server);
  if (uid)
    p.uid = *uid;
  else
    p.unknown_uid_reason = uid.error().message;
  return p;
}

void configure(httplib::Server& http, const ServerDeps& deps, const ConnectionLimits& limits,
               bool local_socket, TriggeredChecks& triggers) {
  // Only for the Keep-Alive header httplib writes: the connection loop enforces both.
  http.set_keep_alive_timeout(
      std::chrono::duration_cast<std::chrono::seconds>(limits.idle_timeout).count());
  http.set_keep_alive_max_count(limits.max_requests_per_connection);
  http.set_payload_max_length(kMaxPayloadBytes);
  // httplib's default also sets SO_REUSEPORT, which would let a second daemon bind the same port
  // silently.
  http.set_socket_options([](int sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });

  const ServerDeps* d = &deps;
  const auto daemon_uid = static_cast<uint32_t>(::geteuid());
  auto refusals = std::make_shared<LogRateLimiter>(kRefusalLogInterval);
  auto log_refusal = [refusals](const httplib::Request& req, const Authorization& auth) {
    if (auto left_out = refusals->admit())
      logger("server")->warn(
          "refused {} {}: {}{}", escape_for_log(req.method), escape_for_log(req.path),
          escape_for_log(auth.refusal, 1024),
          *left_out == 0 ? "" : " (" + std::to_string(*left_out) + " more refusals not logged)");
  };
  // Whether the request's peer may do what mutating requests do; a refusal is logged.
  auto authorize = [d, local_socket, daemon_uid, log_refusal](const httplib::Request& req) {
    auto identify = [&] {
      return local_socket ? local_socket_peer(req) : tcp_peer(req, d->config->host_root);
    };
    auto auth = authorize_mutation(req.get_header_value("Authorization"), d->config->admin_token,
                                   daemon_uid, identify);
    if (!auth.allowed) log_refusal(req, auth);
    return auth;
  };
  // Under --api-remote-reads-need-token, whether a TCP peer may ask anything at all; /healthz
  // stays open to liveness probes, and the Unix socket's peers are on this host. A refusal is
  // logged.
  auto admit_remote = [d, local_socket, log_refusal](const httplib::Request& req) {
    if (local_socket || !d->config->api_remote_reads_need_token || req.path == "/healthz")
      return Authorization{true, "", ""};
    auto auth = authorize_remote_request(req.remote_addr, req.get_header_value("Authorization"),
                                         d->config->admin_token, describe_peer(req));
    if (!auth.allowed) log_refusal(req, auth);
    return auth;
  };
  http.set_pre_routing_handler(
      [authorize, admit_remote](const httplib::Request& req, httplib::Response& res) {
        // The request object is httplib's own (non-const), handed to the handlers as const; the
        // headers changed here are read by httplib after this handler.
        auto& headers = const_cast<httplib::Request&>(req).headers;
        // httplib picks the response encoding from this header after the handler ran.
        if (auto it = headers.find("Accept-Encoding"); it != headers.end())
          it->second = without_brotli(it->second);
        if (auto admitted = admit_remote(req); !admitted.allowed) {
          res.set_header("WWW-Authenticate", "Bearer");
          write_error(req, res, 401, admitted.refusal);
          return httplib::Server::HandlerResponse::Handled;
        }
        if (!is_mutating(req.method)) return httplib::Server::HandlerResponse::Unhandled;
        // A request with neither Content-Length nor Transfer-Encoding has no body (RFC 9112
        // section 6.3), which is how GPUd's clients and `curl -X POST` send set-healthy; httplib
        // 0.11 would instead read a body until the client closes or the read times out.
        if (!req.has_header("Content-Length") && !req.has_header("Transfer-Encoding"))
          headers.emplace("Content-Length", "0");
        auto auth = authorize(req);
        headers.erase(kPrincipalHeader);
        if (auth.allowed) {
          headers.emplace(kPrincipalHeader, auth.principal);
          return httplib::Server::HandlerResponse::Unhandled;
        }
        write_error(req, res, 403, auth.refusal);
        return httplib::Server::HandlerResponse::Handled;
      });

  if (d->metrics != nullptr)
    d->metrics->describe(kRequestErrorsTotal,
                         "API requests whose handler failed with an exception (answered 500)",
                         MetricKind::kCounter);
  http.set_exception_handler(
      [d](const httplib::Request& req, httplib::Response& res, std::exception_ptr ep) {
        answer_request_exception(req, res, ep, d->metrics);
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
    auto log = logger("server");
    if (!log->should_log(spdlog::level::debug)) return;  // spares describe_peer's string
    log->debug("{} {} {} -> {} ({} bytes)", describe_peer(req), req.method, req.path, res.status,
               res.body.size());
  });

  register_v1_routes(http, deps);
  // Half the listener's workers at most wait for triggered checks (at least one).
  register_trigger_routes(
      http, deps,
      {&triggers, std::max<size_t>(1, limits.workers / 2), deps.trigger_wait, authorize});
  register_admin_routes(http, deps);
  if (deps.web_enable) register_web_routes(http);
}

// The local socket's directory: ours and closed to everyone else, since the socket's mode alone
// is what lets only root and the daemon's user connect, and a directory another user controls
// could swap the socket for theirs.
Result<void> prepare_socket_dir(const std::filesystem::path& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return make_error("cannot create " + dir.string() + ": " + ec.message());
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0)
    return make_error("cannot stat " + dir.string() + ": " + std::strerror(errno));
  if (!S_ISDIR(st.st_mode)) return make_error(dir.string() + " is not a directory");
  if (st.st_uid != ::geteuid())
    return make_error(dir.string() + " belongs to uid " + std::to_string(st.st_uid) +
                      ", not to the daemon's user (uid " + std::to_string(::geteuid()) + ")");
  if ((st.st_mode & 0077) != 0 && ::chmod(dir.c_str(), 0700) != 0)
    return make_error("cannot chmod 0700 " + dir.string() + ": " + std::strerror(errno));
  return {};
}

// Unlinks a socket left behind by a daemon that did not stop cleanly; refuses a path that is not a
// socket, or one that a live process still accepts on.
Result<void> remove_stale_socket(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return {};  // nothing there
  if (!S_ISSOCK(st.st_mode)) return make_error(path + " exists and is not a socket");
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return make_error(std::string("socket: ") + std::strerror(errno));
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  bool live = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  ::close(fd);
  if (live) return make_error("another process serves " + path);
  if (::unlink(path.c_str()) != 0)
    return make_error("cannot remove the stale socket " + path + ": " + std::strerror(errno));
  return {};
}

}  // namespace

namespace {

// The material through the helper when the config names one (server/tls.h: the daemon then parses
// no certificate until a TLS connection comes), in process when it does not or the helper is
// broken.
Result<TlsMaterial> resolve_tls(const Config& config) {
  if (config.tls_helper.empty()) return resolve_tls_material(config);
  auto material = resolve_tls_material_in_helper(config, config.tls_helper);
  if (material || material.error().code != kTlsHelperBroken) return material;
  logger("server")->warn("{}; reading the TLS certificate in the daemon instead",
                         material.error().message);
  return resolve_tls_material(config);
}

}  // namespace

struct Server::Listener : ConnectionLoop {
  using ConnectionLoop::ConnectionLoop;
};

Server::Server(ServerDeps deps) : deps_(std::move(deps)) {}

Server::~Server() { stop(); }

Result<void> Server::start() {
  if (tcp_) return make_error("server already started");
  if (deps_.config == nullptr || deps_.registry == nullptr || deps_.scheduler == nullptr)
    return make_error("server needs a config, a registry and a scheduler");
  auto addr = parse_listen_address(deps_.config->listen_address);
  if (!addr) return addr.error();

  // The local socket's checks come first, so a refusal leaves nothing bound.
  const std::string& socket_path = deps_.config->api_socket;
  if (!socket_path.empty()) {
    constexpr size_t kMaxPath = sizeof(sockaddr_un{}.sun_path) - 1;
    if (socket_path.size() > kMaxPath)
      return make_error("the local socket " + socket_path +
                        " is longer than a Unix socket path can be (" + std::to_string(kMaxPath) +
                        " bytes); give a shorter --api-socket, or --api-socket \"\" for none");
    if (auto r = prepare_socket_dir(std::filesystem::path(socket_path).parent_path()); !r)
      return make_error("cannot serve the local socket: " + r.error().message);
    if (auto r = remove_stale_socket(socket_path); !r)
      return make_error("cannot serve the local socket: " + r.error().message);
  }

  auto http = std::make_unique<RequestHandler>();
  std::unique_ptr<LazyTlsContext> tls;
  std::string tls_source;
  if (!deps_.config->no_tls) {
    auto material = resolve_tls(*deps_.config);
    if (!material) return material.error();
    for (const TlsMaterial::LogLine& line : material->log) {
      if (line.warning)
        logger("server")->warn("{}", line.text);
      else
        logger("server")->info("{}", line.text);
    }
    tls_source = material->source;
    tls = std::make_unique<LazyTlsContext>(std::move(*material));
  }
  auto triggers = std::make_unique<TriggeredChecks>(*deps_.scheduler, kTriggerWorkers);
  configure(*http, deps_, tcp_limits(), /*local_socket=*/false, *triggers);

  errno = 0;
  int port = addr->port == 0 ? http->bind_to_any_port(addr->host)
                             : (http->bind_to_port(addr->host, addr->port) ? addr->port : -1);
  if (port < 0) {
    int err = errno;
    return make_error("cannot listen on " + display_address(*addr, addr->port) + ": " +
                      (err != 0 ? std::strerror(err) : "address in use or not available"));
  }
  auto tcp = std::make_unique<Listener>(std::move(http), std::move(tls), tcp_limits(),
                                        display_address(*addr, port));

  std::unique_ptr<Listener> local;
  if (!socket_path.empty()) {
    auto local_http = std::make_unique<RequestHandler>();
    local_http->set_address_family(AF_UNIX);
    configure(*local_http, deps_, local_socket_limits(), /*local_socket=*/true, *triggers);
    // httplib takes the path as the host. A Unix socket has no port, but port 0 would make httplib
    // ask the socket for its (IP) port and fail.
    errno = 0;
    bool bound = local_http->bind_to_port(socket_path, 1);
    int err = errno;
    local = std::make_unique<Listener>(std::move(local_http), nullptr, local_socket_limits(),
                                       socket_path);
    std::string failure = bound ? "" : "cannot listen on " + socket_path + ": ";
    if (bound && ::chmod(socket_path.c_str(), 0600) != 0) {
      err = errno;
      failure = "cannot chmod 0600 " + socket_path + ": ";
      local->stop();  // closes the bound socket
      ::unlink(socket_path.c_str());
    }
    if (!failure.empty()) {
      tcp->stop();
      return make_error(failure + (err != 0 ? std::strerror(err) : "bind failed"));
    }
  }

  if (auto r = tcp->start(); !r) return make_error("cannot serve: " + r.error().message);
  triggers_ = std::move(triggers);
  tcp_ = std::move(tcp);
  port_ = port;
  if (local) {
    if (auto r = local->start(); !r) {
      stop();
      return make_error("cannot serve " + socket_path + ": " + r.error().message);
    }
    local_ = std::move(local);
  }

  logger("server")->info("serving {} on {}{}{}", deps_.config->no_tls ? "http" : "https",
                         display_address(*addr, port_),
                         tls_source.empty() ? "" : " (certificate: " + tls_source + ")",
                         local_ ? " and http on " + socket_path : "");
  return {};
}

void Server::stop() {
  // First: requests that wait for triggered checks answer with what has finished.
  if (triggers_) triggers_->stop();
  if (local_) {
    local_->stop();
    local_.reset();
    ::unlink(deps_.config->api_socket.c_str());
  }
  if (!tcp_) return;
  tcp_->stop();
  tcp_.reset();
  triggers_.reset();
  logger("server")->debug("stopped");
}

int Server::port() const { return port_; }

}  // namespace gpud::server
