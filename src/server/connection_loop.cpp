#include "server/connection_loop.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <deque>
#include <list>
#include <mutex>
#include <optional>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "core/log.h"
#include "core/parse_number.h"
#include "core/strings.h"
#include "server/http_util.h"

namespace gpud::server {
namespace {

using SteadyClock = std::chrono::steady_clock;
using namespace std::chrono_literals;

// A header block longer than this without its blank line is not a request httplib would take.
constexpr size_t kMaxHeadBytes = 2 * CPPHTTPLIB_HEADER_MAX_LENGTH;
constexpr size_t kReadChunk = 16 * 1024;
constexpr size_t kWriteChunk = 64 * 1024;
// Connections over the caps that still get their 503 (the handshake and the request are read
// first); beyond these they are closed at once.
constexpr size_t kMaxRejecting = 64;
constexpr auto kRejectTimeout = 2s;
// How long stop() waits for handlers that are running when it cuts their connections.
constexpr auto kStopGrace = 3s;
constexpr auto kLogInterval = 10s;
// Requests of one connection the loop serves in a row (pipelined ones) before a worker takes the
// rest, so that one client cannot hold the loop.
constexpr int kInlineBurst = 16;

struct SslFree {
  void operator()(SSL* s) const { SSL_free(s); }
};

struct Connection {
  int fd = -1;
  std::unique_ptr<SSL, SslFree> ssl;
  std::string peer;    // the peer's address, for the per-peer cap ("" on a Unix socket)
  bool local = false;  // 127.0.0.1, ::1 or a Unix socket: may take the reserved slots
  // While it waits (parked): where it stands in the queues of connections that give way to a
  // newcomer, longest-waiting first (of its class, and of its peer).
  std::list<Connection*>::iterator waiting_at;
  std::list<Connection*>::iterator peer_waiting_at;
  bool handshake_done = false;
  bool reject = false;      // over a cap: answer 503 and close
  bool want_write = false;  // TLS needs the socket writable to go on reading
  bool closing = false;     // a worker is done with it: close
  bool eof = false;         // the client has sent all it will (half-closed)
  std::string in;           // bytes read and not yet consumed by httplib
  size_t in_pos = 0;
  SteadyClock::time_point deadline;  // of the current phase
  bool in_request = false;           // a request's first byte has arrived
  size_t requests = 0;
  // Response bytes the loop thread could not send at once (the socket was full); a worker sends
  // them before anything else, then closes the connection when close_after_send.
  std::string unsent;
  bool close_after_send = false;

  std::string_view pending() const { return std::string_view(in).substr(in_pos); }
  void compact() {
    if (in_pos == 0) return;
    in.erase(0, in_pos);
    in_pos = 0;
  }
};

bool iequals_prefix(std::string_view line, std::string_view name) {
  if (line.size() < name.size()) return false;
  for (size_t i = 0; i < name.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(line[i])) != name[i]) return false;
  return true;
}

enum class Arrival {
  kIncomplete,
  kComplete,
  kUnreadable,
  kMethodRefused,  // ConnectionLimits::methods
  kBodyRefused,    // ConnectionLimits::worker_reads_bodies
};

// What a request's header block says about its body.
struct RequestHead {
  size_t size = 0;              // the request line and headers with the blank line
  bool body_by_worker = false;  // Transfer-Encoding or Expect: the worker reads the body
  // Content-Length: the last one, and the largest (an unreadable one counts as SIZE_MAX).
  std::optional<size_t> content_length;
  size_t largest_content_length = 0;
};

// The header block at the start of buf; nullopt while it has not fully arrived.
std::optional<RequestHead> read_head(std::string_view buf) {
  auto end = buf.find("\r\n\r\n");
  if (end == std::string_view::npos) return std::nullopt;
  RequestHead h;
  h.size = end + 4;
  std::string_view head = buf.substr(0, end + 2);
  for (size_t at = head.find("\r\n"); at != std::string_view::npos && at + 2 < head.size();) {
    size_t next = head.find("\r\n", at + 2);
    std::string_view line = head.substr(at + 2, next - at - 2);
    at = next;
    if (iequals_prefix(line, "transfer-encoding:") || iequals_prefix(line, "expect:"))
      h.body_by_worker = true;
    if (iequals_prefix(line, "content-length:")) {
      auto n = parse_integer<size_t>(trim(line.substr(15)));
      h.largest_content_length = std::max(h.largest_content_length, n.value_or(SIZE_MAX));
      if (n) h.content_length = *n;
    }
  }
  return h;
}

// Whether the bytes hold a whole request: its header block and, for a Content-Length up to
// max_body, its body. A chunked body, one larger than max_body or one awaiting "100 Continue" is
// left to the worker (it reads it under the request's deadline); so is an unreadable length
// (httplib answers it).
Arrival request_arrival(std::string_view buf, size_t max_body) {
  auto head = read_head(buf);
  if (!head) return buf.size() > kMaxHeadBytes ? Arrival::kUnreadable : Arrival::kIncomplete;
  if (head->body_by_worker || head->largest_content_length > max_body) return Arrival::kComplete;
  return buf.size() - head->size >= head->content_length.value_or(0) ? Arrival::kComplete
                                                                     : Arrival::kIncomplete;
}

// A request line longer than this without its first space names no method a listener serves.
constexpr size_t kMaxMethodBytes = 16;

// Whether the request at the start of buf may have a method of `methods` (empty: any); true while
// its method has not fully arrived.
bool method_allowed(std::string_view buf, const std::vector<std::string>& methods) {
  if (methods.empty()) return true;
  const size_t space = buf.find(' ');
  if (space == std::string_view::npos) return buf.size() < kMaxMethodBytes;
  return std::find(methods.begin(), methods.end(), buf.substr(0, space)) != methods.end();
}

// Whether the bytes begin with a whole GET of one of `paths` that has no body, so that serving it
// reads nothing more from the socket.
bool inline_request(std::string_view buf, const std::vector<std::string>& paths) {
  if (paths.empty() || buf.substr(0, 4) != "GET ") return false;
  auto head = read_head(buf);
  if (!head || head->body_by_worker || head->largest_content_length != 0) return false;
  std::string_view line = buf.substr(0, buf.find("\r\n"));
  std::string_view target = line.substr(4, line.find(' ', 4) - 4);
  std::string_view path = target.substr(0, target.find('?'));
  return std::find(paths.begin(), paths.end(), path) != paths.end();
}

// 127.0.0.1, ::1 (also as ::ffff:127.0.0.1) or a Unix socket: the peers the reserve is for.
bool is_local_peer(const sockaddr_storage& addr) {
  if (addr.ss_family == AF_UNIX) return true;
  if (addr.ss_family == AF_INET)
    return reinterpret_cast<const sockaddr_in&>(addr).sin_addr.s_addr == htonl(INADDR_LOOPBACK);
  if (addr.ss_family != AF_INET6) return false;
  const in6_addr& a = reinterpret_cast<const sockaddr_in6&>(addr).sin6_addr;
  static const uint8_t kMappedLoopback[16] = {0, 0, 0,    0,    0,   0, 0, 0,
                                              0, 0, 0xff, 0xff, 127, 0, 0, 1};
  return IN6_IS_ADDR_LOOPBACK(&a) || std::memcmp(a.s6_addr, kMappedLoopback, 16) == 0;
}

std::string peer_address(const sockaddr_storage& addr) {
  char host[NI_MAXHOST] = "";
  if (addr.ss_family != AF_INET && addr.ss_family != AF_INET6) return "";
  if (::getnameinfo(reinterpret_cast<const sockaddr*>(&addr), sizeof addr, host, sizeof host,
                    nullptr, 0, NI_NUMERICHOST) != 0)
    return "";
  return host;
}

// The address and port of one end of a socket, as httplib reports them (on a Unix socket: no
// address, and the peer's pid as the port).
void socket_ip_and_port(int fd, bool peer, std::string& ip, int& port) {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  int rc = peer ? ::getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len)
                : ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  if (rc != 0) return;
  if (addr.ss_family == AF_UNIX) {
    ucred cred{};
    socklen_t clen = sizeof cred;
    if (peer && ::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &clen) == 0) port = cred.pid;
    return;
  }
  char host[NI_MAXHOST] = "";
  char serv[NI_MAXSERV] = "";
  if (::getnameinfo(reinterpret_cast<sockaddr*>(&addr), len, host, sizeof host, serv, sizeof serv,
                    NI_NUMERICHOST | NI_NUMERICSERV) == 0) {
    ip = host;
    port = parse_integer<int>(serv).value_or(0);
  }
}

bool wait_for(int fd, short events, SteadyClock::time_point deadline) {
  for (;;) {
    auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - SteadyClock::now());
    if (left.count() <= 0) return false;
    pollfd p{fd, events, 0};
    int rc = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left.count(), 1000)));
    if (rc > 0) return (p.revents & (events | POLLERR | POLLHUP)) != 0;
    if (rc < 0 && errno != EINTR) return false;
  }
}

// The stream a worker hands httplib: the bytes the loop read ahead first, then the socket, every
// read and write bounded by the request's deadlines. On the loop thread (`on_loop`) it never
// waits: it reads only what the loop read ahead and gathers the response for send_now().
class ConnectionStream : public httplib::Stream {
 public:
  ConnectionStream(Connection& c, SteadyClock::time_point read_deadline,
                   SteadyClock::time_point write_deadline, bool on_loop = false)
      : c_(c), read_deadline_(read_deadline), write_deadline_(write_deadline), on_loop_(on_loop) {}

  bool is_readable() const override {
    return !c_.pending().empty() || (c_.ssl && SSL_pending(c_.ssl.get()) > 0) ||
           (!on_loop_ && wait_for(c_.fd, POLLIN, read_deadline_));
  }
  bool is_writable() const override {
    return on_loop_ || wait_for(c_.fd, POLLOUT, write_deadline_);
  }

  ssize_t read(char* ptr, size_t size) override {
    if (c_.pending().empty()) {
      if (on_loop_) return -1;  // inline_request() vouched for a whole request
      // What httplib wrote so far may be what the client waits for ("100 Continue").
      if (!flush()) return -1;
      c_.in.clear();
      c_.in_pos = 0;
      char buf[kReadChunk];
      ssize_t n = receive(buf, sizeof buf, read_deadline_);
      if (n <= 0) return n;
      c_.in.assign(buf, static_cast<size_t>(n));
    }
    size_t n = std::min(size, c_.pending().size());
    std::memcpy(ptr, c_.in.data() + c_.in_pos, n);
    c_.in_pos += n;
    return static_cast<ssize_t>(n);
  }

  // httplib writes a response's head and body separately; gathered here, a small response leaves
  // in one write (one TLS record) when the worker flushes after the request.
  ssize_t write(const char* ptr, size_t size) override {
    out_.append(ptr, size);
    if (!on_loop_ && out_.size() >= kWriteChunk && !flush()) return -1;
    return static_cast<ssize_t>(size);
  }

  // Sends what write() gathered; false when the connection failed or the deadline passed.
  bool flush() {
    if (out_.empty()) return true;
    bool ok = send_all(out_.data(), out_.size());
    out_.clear();
    return ok;
  }

  // On the loop thread: sends what the socket takes now and leaves the rest in the connection's
  // `unsent`; false when the connection failed.
  bool send_now() {
    size_t done = 0;
    bool ok = send_all(out_.data(), out_.size(), &done);
    if (ok && done < out_.size()) c_.unsent.assign(out_, done);
    out_.clear();
    return ok;
  }

  // A worker: sends the connection's `unsent` first.
  bool send_unsent() {
    bool ok = send_all(c_.unsent.data(), c_.unsent.size());
    c_.unsent.clear();
    return ok;
  }

 private:
  // Sends size bytes, waiting until the write deadline; with `sent`, does not wait but stops where
  // the socket is full and says how far it got.
  bool send_all(const char* ptr, size_t size, size_t* sent = nullptr) {
    size_t done = 0;
    while (done < size) {
      ssize_t n;
      short wait = POLLOUT;
      if (c_.ssl) {
        ERR_clear_error();
        int chunk = static_cast<int>(std::min<size_t>(size - done, 1 << 30));
        n = SSL_write(c_.ssl.get(), ptr + done, chunk);
        if (n <= 0) {
          int err = SSL_get_error(c_.ssl.get(), static_cast<int>(n));
          if (err == SSL_ERROR_WANT_READ)
            wait = POLLIN;
          else if (err != SSL_ERROR_WANT_WRITE)
            return false;
          n = -1;
          errno = EAGAIN;
        }
      } else {
        n = ::send(c_.fd, ptr + done, size - done, MSG_NOSIGNAL);
      }
      if (n > 0) {
        done += static_cast<size_t>(n);
        continue;
      }
      if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return false;
      if (sent != nullptr && errno != EINTR) break;
      if (!wait_for(c_.fd, wait, write_deadline_)) return false;
    }
    if (sent != nullptr) *sent = done;
    return true;
  }

 public:
  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    socket_ip_and_port(c_.fd, true, ip, port);
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    socket_ip_and_port(c_.fd, false, ip, port);
  }
  socket_t socket() const override { return c_.fd; }

 private:
  // Up to `size` bytes from the socket (through TLS), waiting until `deadline`; 0 at the end of
  // the stream, -1 on an error or at the deadline.
  ssize_t receive(char* buf, size_t size, SteadyClock::time_point deadline) const {
    for (;;) {
      short wait = POLLIN;
      if (c_.ssl) {
        ERR_clear_error();
        int n = SSL_read(c_.ssl.get(), buf, static_cast<int>(size));
        if (n > 0) return n;
        int err = SSL_get_error(c_.ssl.get(), n);
        if (err == SSL_ERROR_ZERO_RETURN) return 0;
        if (err == SSL_ERROR_WANT_WRITE)
          wait = POLLOUT;
        else if (err != SSL_ERROR_WANT_READ)
          return -1;
      } else {
        ssize_t n = ::recv(c_.fd, buf, size, 0);
        if (n >= 0) return n;
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return -1;
      }
      if (!wait_for(c_.fd, wait, deadline)) return -1;
    }
  }

  Connection& c_;
  SteadyClock::time_point read_deadline_;
  SteadyClock::time_point write_deadline_;
  bool on_loop_;
  std::string out_;
};

}  // namespace

struct ConnectionLoop::Impl {
  std::unique_ptr<RequestHandler> http;
  std::unique_ptr<LazyTlsContext> tls;  // null for plain HTTP
  ConnectionLimits limits;
  std::string name;

  int listen_fd = -1;
  int epoll_fd = -1;
  int wake_fd = -1;
  int spare_fd = -1;  // given up to accept and drop a connection when no descriptor is left
  std::thread loop_thread;
  std::vector<std::thread> workers;
  std::atomic<bool> stopping{false};

  // Owned by the loop thread: every open connection (parked or at a worker) and the counts.
  std::unordered_map<Connection*, std::unique_ptr<Connection>> connections;
  std::unordered_set<Connection*> parked;  // waited on by epoll
  // The parked connections that are not being refused (each waits for its first byte, the rest of
  // a request, or the next one), longest-waiting first: those of local peers, and the others.
  std::list<Connection*> waiting_local;
  std::list<Connection*> waiting_other;
  struct PeerConnections {
    size_t open = 0;
    std::list<Connection*> waiting;  // longest-waiting first
  };
  std::unordered_map<std::string, PeerConnections> per_peer;
  size_t served = 0;        // open connections that are not being refused
  size_t served_local = 0;  // of which from local peers
  size_t reserve = 0;       // slots only local peers may take
  size_t rejecting = 0;     // open connections being refused with a 503

  // Loop thread -> workers: requests that have arrived.
  std::mutex ready_mu;
  std::condition_variable ready_cv;
  std::deque<Connection*> ready;
  bool workers_done = false;
  // Workers -> loop thread: connections to wait on again, or to close.
  std::mutex back_mu;
  std::vector<Connection*> back;
  // Connections at a worker, for stop() to cut (shutdown(2) ends their blocking reads and writes).
  std::mutex busy_mu;
  std::unordered_set<int> busy_fds;

  LogRateLimiter refused_log{kLogInterval};
  LogRateLimiter displaced_log{kLogInterval};
  LogRateLimiter accept_log{kLogInterval};
  LogRateLimiter tls_log{kLogInterval};

  void wake() {
    uint64_t one = 1;
    [[maybe_unused]] auto n = ::write(wake_fd, &one, sizeof one);
  }

  void park(Connection* c) {
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLRDHUP;
    if (c->want_write) ev.events |= EPOLLOUT;
    ev.data.ptr = c;
    if (parked.insert(c).second) {
      ::epoll_ctl(epoll_fd, EPOLL_CTL_ADD, c->fd, &ev);
      if (!c->reject) enqueue_waiting(c);
    } else {
      ::epoll_ctl(epoll_fd, EPOLL_CTL_MOD, c->fd, &ev);
    }
  }

  void unpark(Connection* c) {
    if (parked.erase(c) == 0) return;
    ::epoll_ctl(epoll_fd, EPOLL_CTL_DEL, c->fd, nullptr);
    if (!c->reject) dequeue_waiting(c);
  }

  bool peer_capped(const Connection& c) const {
    return !c.peer.empty() && limits.max_connections_per_peer != 0;
  }

  void enqueue_waiting(Connection* c) {
    auto& queue = c->local ? waiting_local : waiting_other;
    c->waiting_at = queue.insert(queue.end(), c);
    if (peer_capped(*c)) {
      auto& of_peer = per_peer[c->peer].waiting;
      c->peer_waiting_at = of_peer.insert(of_peer.end(), c);
    }
  }

  void dequeue_waiting(Connection* c) {
    (c->local ? waiting_local : waiting_other).erase(c->waiting_at);
    if (peer_capped(*c)) per_peer[c->peer].waiting.erase(c->peer_waiting_at);
  }

  // A parked connection that has just been served starts waiting anew, behind the others.
  void requeue(Connection* c) {
    if (c->reject || parked.count(c) == 0) return;
    dequeue_waiting(c);
    enqueue_waiting(c);
  }

  // Makes room for a newcomer (`c`, not counted yet) when the table, the part of it c's class may
  // take, or c's peer's share is full: closes the connection in the way that has waited longest
  // for a request. A local peer's connection gives way to a local newcomer, or to any when local
  // peers hold more than the reserve. Returns the cap that is full with connections being served,
  // as "N connections open..., the limit is M"; nullopt when c has room.
  std::optional<std::string> make_room(const Connection& c) {
    std::list<Connection*>* candidates[2] = {nullptr, nullptr};
    std::string full;
    auto describe = [&](size_t open, const char* whose, size_t limit) {
      full = std::to_string(open) + " connections open" + whose + ", the limit is " +
             std::to_string(limit);
    };
    if (peer_capped(c)) {
      auto it = per_peer.find(c.peer);
      if (it != per_peer.end() && it->second.open >= limits.max_connections_per_peer) {
        candidates[0] = &it->second.waiting;
        describe(it->second.open, " from it", limits.max_connections_per_peer);
      }
    }
    if (full.empty() && reserve > 0 && !c.local &&
        served - served_local >= limits.max_connections - reserve) {
      candidates[0] = &waiting_other;
      describe(served - served_local, " from addresses other than 127.0.0.1 and ::1",
               limits.max_connections - reserve);
    }
    if (full.empty() && served >= limits.max_connections) {
      candidates[0] = &waiting_other;
      if (c.local || served_local > reserve) candidates[1] = &waiting_local;
      describe(served, "", limits.max_connections);
    }
    if (full.empty()) return std::nullopt;
    for (auto* queue : candidates) {
      if (queue == nullptr || queue->empty()) continue;
      Connection* displaced = queue->front();
      if (auto left_out = displaced_log.admit())
        logger("server")->warn(
            "{}: closing a waiting connection from {} to admit one from {}: {}{}", name,
            peer_for_log(displaced->peer), peer_for_log(c.peer), full,
            *left_out ? " (" + std::to_string(*left_out) + " more not logged)" : "");
      close_connection(displaced);
      return std::nullopt;
    }
    return full;
  }

  static std::string peer_for_log(const std::string& peer) {
    return escape_for_log(peer.empty() ? "the local socket" : peer);
  }

  void close_connection(Connection* c) {
    unpark(c);
    if (c->ssl && c->handshake_done && !c->reject) SSL_shutdown(c->ssl.get());  // best effort
    ::close(c->fd);
    if (c->reject) {
      --rejecting;
    } else {
      --served;
      if (c->local) --served_local;
      if (peer_capped(*c)) {
        auto it = per_peer.find(c->peer);
        if (it != per_peer.end() && --it->second.open == 0) per_peer.erase(it);
      }
    }
    connections.erase(c);
  }

  void dispatch(Connection* c) {
    unpark(c);
    {
      std::lock_guard lock(busy_mu);
      busy_fds.insert(c->fd);
    }
    {
      std::lock_guard lock(ready_mu);
      ready.push_back(c);
    }
    ready_cv.notify_one();
  }

  // An answer the loop writes itself once the request has arrived (so that the client reads it
  // instead of a reset), then closes the connection. `headers`: extra lines, each ending in CRLF.
  void answer_and_close(Connection* c, int status, std::string_view reason,
                        const std::string& headers, std::string_view message) {
    std::string body = error_body(status, message).dump();
    std::string response = "HTTP/1.1 " + std::to_string(status) + " " + std::string(reason) +
                           "\r\nContent-Type: application/json\r\nConnection: close\r\n" + headers +
                           "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
    if (c->ssl)
      SSL_write(c->ssl.get(), response.data(), static_cast<int>(response.size()));
    else [[maybe_unused]]
      auto n = ::send(c->fd, response.data(), response.size(), MSG_NOSIGNAL);
    ::shutdown(c->fd, SHUT_WR);
    close_connection(c);
  }

  void answer_503(Connection* c) {
    answer_and_close(c, 503, "Service Unavailable", "Retry-After: 1\r\n",
                     "too many connections; retry later");
  }

  // A request the limits refuse (kMethodRefused, kBodyRefused): answered before its body.
  void refuse_request(Connection* c, Arrival why) {
    if (why == Arrival::kBodyRefused)
      return answer_and_close(c, 413, "Payload Too Large", "",
                              "request bodies are not read on this listener");
    const std::string allowed = join(limits.methods, ", ");
    answer_and_close(c, 405, "Method Not Allowed", "Allow: " + allowed + "\r\n",
                     "method not allowed; this listener serves " + allowed);
  }

  // What the bytes c holds make of its next request.
  Arrival arrival_of(const Connection& c) const {
    if (!method_allowed(c.pending(), limits.methods)) return Arrival::kMethodRefused;
    if (!limits.worker_reads_bodies) {
      auto head = read_head(c.pending());
      if (head && (head->body_by_worker || head->largest_content_length > limits.max_body_bytes))
        return Arrival::kBodyRefused;
    }
    return request_arrival(c.pending(), limits.max_body_bytes);
  }

  // Reads what the socket has (handshaking first over TLS); serves a request for one of the inline
  // paths that has fully arrived, dispatches any other; closes a connection that ended, failed or
  // sent what cannot be a request.
  void on_readable(Connection* c) {
    auto now = SteadyClock::now();
    c->want_write = false;
    if (c->ssl && !c->handshake_done) {
      ERR_clear_error();
      int rc = SSL_accept(c->ssl.get());
      if (rc != 1) {
        int err = SSL_get_error(c->ssl.get(), rc);
        if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) {
          c->want_write = err == SSL_ERROR_WANT_WRITE;
          park(c);
          return;
        }
        if (tls_log.admit())
          logger("server")->debug("{}: TLS handshake with {} failed", name, c->peer);
        return close_connection(c);
      }
      c->handshake_done = true;
      c->deadline =
          now + (c->reject ? std::chrono::milliseconds(kRejectTimeout) : limits.idle_timeout);
    }
    for (int served_here = 0;; ++served_here) {
      if (!read_available(c, now)) return close_connection(c);
      if (c->in_request) {
        const Arrival arrival = arrival_of(*c);
        switch (arrival) {
          case Arrival::kIncomplete:
            if (c->eof) return close_connection(c);
            break;
          case Arrival::kUnreadable: return close_connection(c);
          case Arrival::kMethodRefused:
          case Arrival::kBodyRefused: return c->reject ? answer_503(c) : refuse_request(c, arrival);
          case Arrival::kComplete:
            if (c->reject) return answer_503(c);
            if (served_here < kInlineBurst && inline_request(c->pending(), limits.inline_paths)) {
              if (!serve_inline(c)) return;  // closed, or at a worker
              now = SteadyClock::now();
              continue;  // the next request may have arrived meanwhile
            }
            return dispatch(c);
        }
      }
      // A half-closed client that sent no request: nothing will come.
      if (c->eof) return close_connection(c);
      break;
    }
    park(c);
  }

  // Reads what the socket has into c->in; false when the connection failed.
  bool read_available(Connection* c, SteadyClock::time_point now) {
    for (;;) {
      char buf[kReadChunk];
      ssize_t n;
      if (c->ssl) {
        ERR_clear_error();
        int rc = SSL_read(c->ssl.get(), buf, sizeof buf);
        if (rc <= 0) {
          int err = SSL_get_error(c->ssl.get(), rc);
          if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) {
            c->want_write = err == SSL_ERROR_WANT_WRITE;
            break;
          }
          if (err != SSL_ERROR_ZERO_RETURN) return false;
          c->eof = true;
          break;
        }
        n = rc;
      } else {
        n = ::recv(c->fd, buf, sizeof buf, 0);
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) break;
        if (n < 0) return false;
        if (n == 0) {
          c->eof = true;
          break;
        }
      }
      if (!c->in_request) {
        c->in_request = true;
        if (!c->reject) c->deadline = now + limits.request_timeout;
      }
      c->compact();
      c->in.append(buf, static_cast<size_t>(n));
      if (c->in.size() > kMaxHeadBytes + limits.max_body_bytes) break;
    }
    return true;
  }

  // Runs httplib over one request of c; false when it could not be read or answered. `done`: the
  // connection ends after it (its last allowed request, the client asked to close, or stopping).
  bool handle_one(Connection* c, ConnectionStream& stream, bool& done) {
    bool last = stopping || ++c->requests >= limits.max_requests_per_connection;
    bool client_closes = false;
    bool ok = false;
    try {
      ok = http->handle(stream, last, client_closes);
    } catch (...) {
      ok = false;  // httplib's own failures; handlers' exceptions are answered as 500 inside
    }
    done = last || client_closes || stopping;
    return ok;
  }

  // Serves the whole request at the front of c->in on the loop thread (inline_request() said it
  // needs nothing more from the socket). True when the connection is to be read on; false when it
  // was closed or handed to a worker (to finish sending a response the socket did not take).
  bool serve_inline(Connection* c) {
    auto now = SteadyClock::now();
    ConnectionStream stream(*c, now + limits.request_timeout, now + limits.response_timeout,
                            /*on_loop=*/true);
    bool done = false;
    bool ok = handle_one(c, stream, done);
    if (!stream.send_now()) ok = false;
    done = done || !ok;
    if (!c->unsent.empty() && ok) {
      c->close_after_send = done;
      dispatch(c);
      return false;
    }
    if (done) {
      close_connection(c);
      return false;
    }
    c->compact();
    c->in_request = !c->in.empty();
    c->deadline = now + (c->in_request ? limits.request_timeout : limits.idle_timeout);
    requeue(c);
    return true;
  }

  void accept_all() {
    for (;;) {
      sockaddr_storage addr{};
      socklen_t len = sizeof addr;
      int fd = ::accept4(listen_fd, reinterpret_cast<sockaddr*>(&addr), &len,
                         SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK) return;
        if (errno == EINTR || errno == ECONNABORTED) continue;
        if (errno == EMFILE || errno == ENFILE) {
          // Take the connection with the spare descriptor and close it, so that it leaves the
          // queue (else epoll reports it again at once) and the client learns at once.
          if (auto left_out = accept_log.admit())
            logger("server")->warn(
                "{}: cannot accept a connection: {} ({} connections open); closing it{}", name,
                std::strerror(errno), served + rejecting,
                *left_out ? " (" + std::to_string(*left_out) + " more not logged)" : "");
          if (spare_fd >= 0) {
            ::close(spare_fd);
            int dropped = ::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
            if (dropped >= 0) ::close(dropped);
            spare_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
          }
          return;
        }
        logger("server")->warn("{}: accept failed: {}", name, std::strerror(errno));
        return;
      }
      auto c = std::make_unique<Connection>();
      c->fd = fd;
      c->peer = peer_address(addr);
      // Without a reserve, every connection is in one queue: the longest-waiting gives way.
      c->local = reserve > 0 && is_local_peer(addr);
      if (auto full = make_room(*c)) {
        if (auto left_out = refused_log.admit())
          logger("server")->warn(
              "{}: refusing a connection from {}: {}, none of them waiting for a request{}", name,
              peer_for_log(c->peer), *full,
              *left_out ? " (" + std::to_string(*left_out) + " more refusals not logged)" : "");
        if (rejecting >= kMaxRejecting) {
          ::close(fd);
          continue;
        }
        c->reject = true;
        ++rejecting;
      } else {
        ++served;
        if (c->local) ++served_local;
        if (peer_capped(*c)) ++per_peer[c->peer].open;
      }
      if (limits.tcp_nodelay && !c->peer.empty()) {
        int yes = 1;
        ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof yes);
      }
      if (tls) {
        // The context is made at the first TLS connection (LazyTlsContext).
        auto ctx = tls->get();
        if (!ctx) {
          if (tls_log.admit())
            logger("server")->error("{}: cannot serve TLS: {}", name, ctx.error().message);
          Connection* raw = c.get();
          connections.emplace(raw, std::move(c));
          close_connection(raw);
          continue;
        }
        c->ssl.reset(SSL_new(*ctx));
        if (!c->ssl || SSL_set_fd(c->ssl.get(), fd) != 1) {
          Connection* raw = c.get();
          connections.emplace(raw, std::move(c));
          close_connection(raw);
          continue;
        }
      } else {
        c->handshake_done = true;
      }
      c->deadline = SteadyClock::now() + (c->reject ? std::chrono::milliseconds(kRejectTimeout)
                                          : tls     ? limits.handshake_timeout
                                                    : limits.idle_timeout);
      Connection* raw = c.get();
      connections.emplace(raw, std::move(c));
      park(raw);
      // A request that came with the connection is taken now, before the connections accepted
      // after it could make it give way. Only when bytes are there: a TLS handshake begun on a
      // connection that sent nothing would allocate its buffers (tens of KiB) for nothing.
      char first;
      if (::recv(raw->fd, &first, 1, MSG_PEEK | MSG_DONTWAIT) >= 0) on_readable(raw);
    }
  }

  // Connections the workers gave back: closed, handed the next request already read, or waited
  // on again.
  void take_back() {
    std::vector<Connection*> items;
    {
      std::lock_guard lock(back_mu);
      items.swap(back);
    }
    auto now = SteadyClock::now();
    for (Connection* c : items) {
      {
        std::lock_guard lock(busy_mu);
        busy_fds.erase(c->fd);
      }
      if (c->closing || stopping) {
        close_connection(c);
        continue;
      }
      c->compact();
      c->in_request = !c->in.empty();
      c->deadline = now + (c->in_request ? limits.request_timeout : limits.idle_timeout);
      const Arrival next = c->in_request ? arrival_of(*c) : Arrival::kIncomplete;
      if (next == Arrival::kComplete) {
        dispatch(c);
        continue;
      }
      if (next == Arrival::kMethodRefused || next == Arrival::kBodyRefused) {
        refuse_request(c, next);
        continue;
      }
      park(c);
      // Bytes TLS already decrypted do not wake epoll.
      if (c->ssl && SSL_pending(c->ssl.get()) > 0) on_readable(c);
    }
  }

  void expire(SteadyClock::time_point now) {
    std::vector<Connection*> late;
    for (Connection* c : parked)
      if (now >= c->deadline) late.push_back(c);
    for (Connection* c : late) close_connection(c);
  }

  // How long epoll may wait: until the nearest deadline of a parked connection, or (none parked)
  // until a worker, stop() or a client wakes it. An idle daemon does not wake up at all.
  int wait_ms() const {
    if (parked.empty()) return -1;
    auto next = SteadyClock::time_point::max();
    for (const Connection* c : parked) next = std::min(next, c->deadline);
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(next - SteadyClock::now());
    return static_cast<int>(std::clamp<int64_t>(left.count(), 0, 60'000));
  }

  void run_loop() {
    epoll_event events[64];
    while (!stopping) {
      int n = ::epoll_wait(epoll_fd, events, 64, wait_ms());
      // Connections the workers are done with first: waiting again, they may give way to a
      // newcomer accepted below.
      take_back();
      for (int i = 0; i < n; ++i) {
        void* p = events[i].data.ptr;
        if (p == &listen_fd) {
          accept_all();
        } else if (p == &wake_fd) {
          uint64_t v;
          [[maybe_unused]] auto r = ::read(wake_fd, &v, sizeof v);
        } else {
          auto* c = static_cast<Connection*>(p);
          // A connection closed earlier in this batch is no longer parked.
          if (parked.count(c) != 0) on_readable(c);
        }
      }
      take_back();
      expire(SteadyClock::now());
    }
    // Stopping: no new connections; cut the ones at workers and close the rest.
    ::epoll_ctl(epoll_fd, EPOLL_CTL_DEL, listen_fd, nullptr);
    ::close(listen_fd);
    listen_fd = -1;
    {
      std::lock_guard lock(busy_mu);
      for (int fd : busy_fds) ::shutdown(fd, SHUT_RDWR);
    }
    std::vector<Connection*> idle(parked.begin(), parked.end());
    for (Connection* c : idle) close_connection(c);
    auto give_up = SteadyClock::now() + kStopGrace;
    while (!connections.empty() && SteadyClock::now() < give_up) {
      take_back();
      if (!connections.empty()) std::this_thread::sleep_for(5ms);
    }
    {
      std::lock_guard lock(ready_mu);
      workers_done = true;
    }
    ready_cv.notify_all();
  }

  void run_worker() {
    for (;;) {
      Connection* c = nullptr;
      {
        std::unique_lock lock(ready_mu);
        ready_cv.wait(lock, [&] { return workers_done || !ready.empty(); });
        if (ready.empty()) return;
        c = ready.front();
        ready.pop_front();
      }
      serve(c);
      {
        std::lock_guard lock(back_mu);
        back.push_back(c);
      }
      wake();
    }
  }

  // Serves the request that has arrived on c, and those behind it that have arrived too; first
  // sends what the loop thread could not.
  void serve(Connection* c) {
    if (!c->unsent.empty()) {
      auto now = SteadyClock::now();
      ConnectionStream stream(*c, now + limits.request_timeout, now + limits.response_timeout);
      if (!stream.send_unsent() || c->close_after_send) {
        c->closing = true;
        return;
      }
      if (arrival_of(*c) != Arrival::kComplete) return;
    }
    for (;;) {
      auto now = SteadyClock::now();
      ConnectionStream stream(*c, now + limits.request_timeout, now + limits.response_timeout);
      bool done = false;
      bool ok = handle_one(c, stream, done);
      if (!stream.flush()) ok = false;
      if (!ok || done || (c->eof && c->pending().empty())) {
        c->closing = true;
        return;
      }
      if (arrival_of(*c) != Arrival::kComplete) return;
    }
  }
};

ConnectionLoop::ConnectionLoop(std::unique_ptr<RequestHandler> http,
                               std::unique_ptr<LazyTlsContext> tls, ConnectionLimits limits,
                               std::string name)
    : impl_(std::make_unique<Impl>()) {
  impl_->http = std::move(http);
  impl_->tls = std::move(tls);
  impl_->limits = limits;
  impl_->name = std::move(name);
}

ConnectionLoop::~ConnectionLoop() { stop(); }

RequestHandler& ConnectionLoop::http() { return *impl_->http; }

Result<void> ConnectionLoop::start() {
  Impl& s = *impl_;
  if (s.loop_thread.joinable()) return make_error("already serving");
  s.listen_fd = s.http->take_listening_socket();
  if (s.listen_fd < 0) return make_error("no bound socket to serve");
  // httplib listens with a backlog of 5: a burst of clients would wait for SYN retransmissions.
  ::listen(s.listen_fd, SOMAXCONN);
  ::fcntl(s.listen_fd, F_SETFL, ::fcntl(s.listen_fd, F_GETFL) | O_NONBLOCK);
  // Leave descriptors for the rest of the daemon (the database, /proc reads, the kernel log).
  rlimit nofile{};
  if (::getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur != RLIM_INFINITY) {
    size_t usable = nofile.rlim_cur > 128 ? static_cast<size_t>(nofile.rlim_cur) / 2 : 16;
    s.limits.max_connections = std::min(s.limits.max_connections, usable);
  }
  s.reserve = std::min(s.limits.reserved_for_local, s.limits.max_connections / 4);
  s.epoll_fd = ::epoll_create1(EPOLL_CLOEXEC);
  s.wake_fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  s.spare_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (s.epoll_fd < 0 || s.wake_fd < 0)
    return make_error(std::string("cannot set up the connection loop: ") + std::strerror(errno));
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.ptr = &s.listen_fd;
  ::epoll_ctl(s.epoll_fd, EPOLL_CTL_ADD, s.listen_fd, &ev);
  ev.data.ptr = &s.wake_fd;
  ::epoll_ctl(s.epoll_fd, EPOLL_CTL_ADD, s.wake_fd, &ev);
  for (size_t i = 0; i < std::max<size_t>(1, s.limits.workers); ++i)
    s.workers.emplace_back([&s] { s.run_worker(); });
  s.loop_thread = std::thread([&s] { s.run_loop(); });
  return {};
}

void ConnectionLoop::stop() {
  Impl& s = *impl_;
  if (!s.loop_thread.joinable()) {
    // Never started: close a socket that was bound for it.
    int fd = s.http ? s.http->take_listening_socket() : -1;
    if (fd >= 0) ::close(fd);
    return;
  }
  s.stopping = true;
  s.wake();
  s.loop_thread.join();
  for (auto& w : s.workers) w.join();
  s.workers.clear();
  for (auto& [raw, c] : s.connections) ::close(c->fd);
  s.connections.clear();
  for (int* fd : {&s.epoll_fd, &s.wake_fd, &s.spare_fd})
    if (*fd >= 0) {
      ::close(*fd);
      *fd = -1;
    }
}

}  // namespace gpud::server
