// ConnectionLoop: serves one bound listener with httplib's request parsing and routing but its own
// connection handling, so that no client can starve the others. httplib 0.11 gives each
// connection a worker thread for its whole life and times out each read on its own; here one
// thread waits on every connection at once (epoll) and reads each request's header and body
// (Content-Length) without a worker, under one deadline for the whole request; a worker serves only
// a request that has fully arrived. It also does the TLS handshake (non-blocking, with a deadline),
// caps connections in total and per peer address, sets TCP_NODELAY on every TCP connection, and
// closes every connection on stop(). A GET of one of `inline_paths` is served on the loop thread
// itself, without a worker.
//
// A full table does not turn newcomers away while it holds connections that are only waiting (for
// their first byte, the rest of a request, or the next request on keep-alive): the one that has
// waited longest is closed to make room, so idle connections cannot lock others out. A few slots
// are kept for local peers (127.0.0.1, ::1, a Unix socket), which connections from other addresses
// cannot take. Only a table whose every connection is being served refuses (a clear 503).
#pragma once

#include <httplib.h>

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "core/result.h"
#include "server/tls.h"

namespace gpud::server {

// httplib's request parsing, routing and response writing, for streams the loop hands it.
class RequestHandler : public httplib::Server {
 public:
  // Reads one request from `stream`, runs its handler and writes the response; false when the
  // request could not be read or the response not written (the connection is then closed).
  // `connection_closed`: the request asked to close (Connection: close, HTTP/1.0).
  bool handle(httplib::Stream& stream, bool close_connection, bool& connection_closed) {
    return process_request(stream, close_connection, connection_closed, [](httplib::Request&) {});
  }
  // The socket bind_to_port()/bind_to_any_port() bound; the loop takes it over.
  int take_listening_socket() { return svr_sock_.exchange(INVALID_SOCKET); }
};

struct ConnectionLimits {
  size_t workers = 4;
  // Open connections at a time; capped further at start by the process's file descriptor limit.
  // A newcomer to a full table takes the place of the connection that has waited longest for a
  // request; when every connection is being served, it gets one 503 and is closed.
  size_t max_connections = 1024;
  // Open connections from one peer address (a newcomer from a peer at its cap takes the place of
  // that peer's longest-waiting connection); 0: no such cap.
  size_t max_connections_per_peer = 256;
  // Of max_connections, the slots only local peers may take: 127.0.0.1, ::1 and a Unix socket
  // (where a liveness probe comes from). At most a quarter of the table.
  size_t reserved_for_local = 0;
  // Request methods served; another is answered 405 by the loop thread as soon as its request line
  // arrives, without reading its body, and the connection closed. Empty: every method.
  std::vector<std::string> methods;
  // Between requests on a keep-alive connection, and from accept to the first byte.
  std::chrono::milliseconds idle_timeout{5000};
  // From a request's first byte to its last (request line, headers and body).
  std::chrono::milliseconds request_timeout{10000};
  std::chrono::milliseconds handshake_timeout{5000};
  // From a request's dispatch until its response is written.
  std::chrono::milliseconds response_timeout{30000};
  size_t max_requests_per_connection = 1000;
  // A body of at most this many bytes is read with its request before a worker takes it; a larger
  // one is read by the worker, under the request's deadline.
  size_t max_body_bytes = 64 << 10;
  // false: a body the loop does not read ahead (larger than max_body_bytes, chunked, or awaiting
  // "100 Continue") is refused instead, 413 at once and the connection closed, so that no request
  // holds a worker waiting for its body.
  bool worker_reads_bodies = true;
  bool tcp_nodelay = true;
  // GET paths (no query needed to match) whose handlers answer at once from memory, such as
  // /healthz: the loop thread serves them itself instead of handing them to a worker, so that a
  // liveness probe never waits for one and costs no thread hand-off. A response the socket cannot
  // take at once is finished by a worker.
  std::vector<std::string> inline_paths;
};

class ConnectionLoop {
 public:
  // `name` prefixes the loop's log lines ("https 0.0.0.0:15132"); `tls` is null for plain HTTP.
  ConnectionLoop(std::unique_ptr<RequestHandler> http, std::unique_ptr<LazyTlsContext> tls,
                 ConnectionLimits limits, std::string name);
  ~ConnectionLoop();
  ConnectionLoop(const ConnectionLoop&) = delete;
  ConnectionLoop& operator=(const ConnectionLoop&) = delete;

  // Takes over the handler's bound socket and serves it on background threads.
  [[nodiscard]] Result<void> start();
  // Stops accepting, closes every connection (a request being handled is cut off) and joins the
  // threads; bounded by the handlers that are running.
  void stop();
  RequestHandler& http();

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace gpud::server
