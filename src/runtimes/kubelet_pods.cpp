#include "runtimes/kubelet_pods.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509_vfy.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <climits>
#include <cstring>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <thread>

#include "core/strings.h"
#include "host/command.h"
#include "host/tcp_sockets.h"

namespace gpud::runtimes {
namespace {

using Clock = std::chrono::steady_clock;

// Where in a PodList a value is: the keys the reader knows.
enum class Field : uint8_t {
  kOther,
  kElement,  // an item of an array
  kItems,
  kKind,
  kMetadata,
  kName,
  kNamespace,
  kUid,
  kStatus,
  kPhase,
  kContainerList,  // initContainerStatuses, containerStatuses, ephemeralContainerStatuses
  kContainerId,
  kReady,
  kRestartCount,
  kState,
  kRunning,
  kWaiting,
  kTerminated,
  kReason,
};
// An open object or array: whether it is an array, and the key it is the value of (kElement in
// an array); a container list also notes whether it lists init containers.
struct Frame {
  bool array = false;
  Field field = Field::kOther;
  bool init_list = false;
  bool operator==(const Frame& o) const { return array == o.array && field == o.field; }
};
constexpr Frame kItemsArray{true, Field::kItems};
constexpr Frame kPod{false, Field::kElement};
constexpr Frame kMetadata{false, Field::kMetadata};
constexpr Frame kStatus{false, Field::kStatus};
constexpr Frame kList{true, Field::kContainerList};
constexpr Frame kContainer{false, Field::kElement};
constexpr Frame kState{false, Field::kState};

// The stream reader of a PodList (nlohmann's SAX interface): keeps the fields KubeletPod holds and
// nothing else, so a large document costs its own bytes and the pods, never a tree of it.
class PodListReader {
 public:
  using json = nlohmann::json;

  bool null() { return value_begins(Value::kNull); }
  bool boolean(bool v) {
    if (!value_begins(Value::kOther)) return false;
    if (in_container() && key_ == Field::kReady) container_.ready = v;
    return true;
  }
  bool number_integer(json::number_integer_t v) {
    if (!value_begins(Value::kOther)) return false;
    if (in_container() && key_ == Field::kRestartCount)
      container_.restart_count = std::max<int64_t>(0, v);
    return true;
  }
  bool number_unsigned(json::number_unsigned_t v) {
    if (!value_begins(Value::kOther)) return false;
    if (in_container() && key_ == Field::kRestartCount)
      container_.restart_count = static_cast<int64_t>(std::min<uint64_t>(v, INT64_MAX));
    return true;
  }
  bool number_float(json::number_float_t, const json::string_t&) {
    return value_begins(Value::kOther);
  }
  bool binary(json::binary_t&) { return value_begins(Value::kOther); }
  bool string(json::string_t& v) {
    if (!value_begins(Value::kOther)) return false;
    if (at({kPod, kMetadata})) {
      if (key_ == Field::kName) pods_.back().name = std::move(v);
      if (key_ == Field::kNamespace) pods_.back().pod_namespace = std::move(v);
      if (key_ == Field::kUid) pods_.back().uid = std::move(v);
    } else if (at({kPod, kStatus})) {
      if (key_ == Field::kPhase) pods_.back().phase = std::move(v);
    } else if (in_container()) {
      if (key_ == Field::kName) container_.name = std::move(v);
      if (key_ == Field::kContainerId) container_.id = std::move(v);
    } else if (in_state_kind()) {
      if (key_ == Field::kReason) state_reasons_[state_index(stack_.back().field)] = std::move(v);
    } else if (stack_.size() == 1 && key_ == Field::kKind) {
      kind_ = std::move(v);
    }
    return true;
  }
  bool key(json::string_t& k) {
    key_ = field_of(k);
    init_key_ = k == "initContainerStatuses";
    return true;
  }
  bool start_object(std::size_t) { return value_begins(Value::kObject) && push(false); }
  bool end_object() {
    if (at({kPod}) && pods_.back().name.empty()) return fail("holds a pod without a name");
    if (in_container()) finish_container();
    return pop();
  }
  bool start_array(std::size_t) { return value_begins(Value::kArray) && push(true); }
  bool end_array() { return pop(); }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) {
    if (error_.empty()) error_ = "is not JSON";
    return false;
  }

  Result<std::vector<KubeletPod>> result() && {
    if (!error_.empty()) return make_error("the kubelet's /pods " + error_);
    if (!items_) {
      if (kind_ == "PodList") return std::vector<KubeletPod>{};  // an empty list may omit them
      return make_error("the kubelet's /pods is not a PodList (no items)");
    }
    return std::move(pods_);
  }

 private:
  enum class Value : uint8_t { kNull, kOther, kObject, kArray };
  // Deeper than any field read; a document nested deeper is no PodList.
  static constexpr size_t kMaxDepth = 64;

  static Field field_of(std::string_view k) {
    static const std::map<std::string_view, Field> kFields = {
        {"items", Field::kItems},
        {"kind", Field::kKind},
        {"metadata", Field::kMetadata},
        {"name", Field::kName},
        {"namespace", Field::kNamespace},
        {"uid", Field::kUid},
        {"status", Field::kStatus},
        {"phase", Field::kPhase},
        {"initContainerStatuses", Field::kContainerList},
        {"containerStatuses", Field::kContainerList},
        {"ephemeralContainerStatuses", Field::kContainerList},
        {"containerID", Field::kContainerId},
        {"ready", Field::kReady},
        {"restartCount", Field::kRestartCount},
        {"state", Field::kState},
        {"running", Field::kRunning},
        {"waiting", Field::kWaiting},
        {"terminated", Field::kTerminated},
        {"reason", Field::kReason},
    };
    auto it = kFields.find(k);
    return it == kFields.end() ? Field::kOther : it->second;
  }
  static bool is_state_kind(Field f) {
    return f == Field::kRunning || f == Field::kWaiting || f == Field::kTerminated;
  }
  static size_t state_index(Field f) {
    return f == Field::kRunning ? 0 : f == Field::kWaiting ? 1 : 2;
  }

  // Whether the open objects and arrays inside the root's "items" are `path`, outermost first.
  bool at(std::initializer_list<Frame> path) const {
    if (stack_.size() != path.size() + 2 || !(stack_[1] == kItemsArray)) return false;
    return std::equal(path.begin(), path.end(), stack_.begin() + 2);
  }
  bool in_container() const { return at({kPod, kStatus, kList, kContainer}); }
  // Inside items[].status.<container list>[].state.<running|waiting|terminated>.
  bool in_state_kind() const {
    static constexpr std::array<Frame, 5> kPath = {kPod, kStatus, kList, kContainer, kState};
    if (stack_.size() != kPath.size() + 3 || !(stack_[1] == kItemsArray)) return false;
    if (stack_.back().array || !is_state_kind(stack_.back().field)) return false;
    return std::equal(kPath.begin(), kPath.end(), stack_.begin() + 2);
  }

  // The field of the value now beginning: the last key in an object, kElement in an array.
  Field value_field() const { return stack_.back().array ? Field::kElement : key_; }

  // A value of any type begins: where it may be, and what beginning there means.
  bool value_begins(Value v) {
    if (stack_.empty()) {
      if (v != Value::kObject) return fail("is not a PodList (not an object)");
      return true;
    }
    const Field f = value_field();
    if (stack_.size() == 1 && f == Field::kItems) {
      if (v == Value::kArray) items_ = true;
      // "items": null is an empty list; anything else is no PodList.
      else if (v != Value::kNull)
        return fail("is not a PodList (items)");
    } else if (at({})) {
      if (v != Value::kObject) return fail("holds an item that is no pod");
      if (pods_.size() == kKubeletMaxPods)
        return fail(fmt::format("lists more than {} pods (a node runs at most a few hundred)",
                                kKubeletMaxPods));
      pods_.emplace_back();
    } else if (at({kPod, kStatus, kList}) && v == Value::kObject) {
      if (++containers_ > kKubeletMaxContainers)
        return fail(fmt::format("lists more than {} containers", kKubeletMaxContainers));
      container_ = KubeletContainer{};
      container_.init = stack_.back().init_list;
      state_present_ = {};
      state_reasons_ = {};
    } else if (at({kPod, kStatus, kList, kContainer, kState}) && is_state_kind(f)) {
      state_present_[state_index(f)] = true;  // any value; only an object's reason is read
    }
    return true;
  }
  bool push(bool array) {
    if (stack_.size() >= kMaxDepth) return fail("is nested deeper than any PodList");
    Frame frame{array, stack_.empty() ? Field::kOther : value_field(), false};
    if (frame.field == Field::kContainerList) frame.init_list = init_key_;
    stack_.push_back(frame);
    key_ = Field::kOther;
    return true;
  }
  bool pop() {
    stack_.pop_back();
    key_ = Field::kOther;
    return true;
  }
  void finish_container() {
    static constexpr std::array<const char*, 3> kStates = {"running", "waiting", "terminated"};
    for (size_t i = 0; i < kStates.size(); ++i) {
      if (!state_present_[i]) continue;
      container_.state = kStates[i];
      container_.reason = std::move(state_reasons_[i]);
      break;
    }
    if (auto scheme = container_.id.find("://"); scheme != std::string::npos) {
      container_.runtime = container_.id.substr(0, scheme);
      container_.id.erase(0, scheme + 3);
    }
    pods_.back().containers.push_back(std::move(container_));
  }
  bool fail(std::string why) {
    error_ = std::move(why);
    return false;
  }

  std::vector<Frame> stack_;
  Field key_ = Field::kOther;
  bool init_key_ = false;
  bool items_ = false;
  std::string kind_;
  std::vector<KubeletPod> pods_;
  size_t containers_ = 0;
  KubeletContainer container_;
  std::array<bool, 3> state_present_{};
  std::array<std::string, 3> state_reasons_;
  std::string error_;
};

// A socket descriptor, closed with its owner.
class Socket {
 public:
  explicit Socket(int fd) : fd_(fd) {}
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;
  ~Socket() {
    if (fd_ >= 0) close(fd_);
  }
  int fd() const { return fd_; }

 private:
  int fd_;
};

struct SslCtxFree {
  void operator()(SSL_CTX* c) const { SSL_CTX_free(c); }
};
struct SslFree {
  void operator()(SSL* s) const { SSL_free(s); }
};

// What every wait of one exchange is measured against.
class Deadline {
 public:
  explicit Deadline(std::chrono::milliseconds timeout)
      : timeout_(timeout), at_(Clock::now() + timeout) {}
  // Waits until `fd` is ready for `events`; false once the deadline has passed.
  bool wait(int fd, short events) const {
    for (;;) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(at_ - Clock::now()).count();
      if (left <= 0) return false;
      pollfd p{fd, events, 0};
      const int n = poll(&p, 1, static_cast<int>(std::min<int64_t>(left, INT_MAX)));
      if (n > 0) return true;  // ready, or an error the next call reports
      if (n < 0 && errno != EINTR) return true;
    }
  }
  bool passed() const { return Clock::now() >= at_; }
  Error expired(const std::string& where) const {
    return make_error(fmt::format("{}: no answer within {} ms", where, timeout_.count()));
  }

 private:
  std::chrono::milliseconds timeout_;
  Clock::time_point at_;
};

std::string ssl_error_text() {
  const unsigned long e = ERR_get_error();
  ERR_clear_error();
  if (e == 0) return "connection closed";
  std::array<char, 256> buf{};
  ERR_error_string_n(e, buf.data(), buf.size());
  return buf.data();
}

// One connection to the kubelet's port, plain or TLS over a non-blocking socket; every call waits
// at most until the exchange's deadline.
class KubeletConnection {
 public:
  KubeletConnection(const KubeletEndpoint& endpoint, const Deadline& deadline)
      : endpoint_(endpoint), where_(endpoint.describe()), deadline_(deadline) {}

  Result<void> connect_to() {
    sockaddr_storage addr{};
    socklen_t len = 0;
    auto* v4 = reinterpret_cast<sockaddr_in*>(&addr);
    auto* v6 = reinterpret_cast<sockaddr_in6*>(&addr);
    if (inet_pton(AF_INET, endpoint_.host.c_str(), &v4->sin_addr) == 1) {
      v4->sin_family = AF_INET;
      v4->sin_port = htons(static_cast<uint16_t>(endpoint_.port));
      len = sizeof(*v4);
    } else if (inet_pton(AF_INET6, endpoint_.host.c_str(), &v6->sin6_addr) == 1) {
      v6->sin6_family = AF_INET6;
      v6->sin6_port = htons(static_cast<uint16_t>(endpoint_.port));
      len = sizeof(*v6);
    } else {
      return make_error(where_ + ": the host is not an IP address");
    }
    socket_ = std::make_unique<Socket>(
        socket(addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (socket_->fd() < 0) return make_error(where_ + ": socket: " + std::strerror(errno));
    int err = 0;
    if (connect(socket_->fd(), reinterpret_cast<sockaddr*>(&addr), len) != 0) {
      if (errno != EINPROGRESS) {
        err = errno;
      } else {
        if (!deadline_.wait(socket_->fd(), POLLOUT)) return deadline_.expired(where_);
        socklen_t err_len = sizeof(err);
        if (getsockopt(socket_->fd(), SOL_SOCKET, SO_ERROR, &err, &err_len) != 0) err = errno;
      }
    }
    if (err == ECONNREFUSED) return make_error(where_ + ": not listening (connection refused)");
    if (err != 0) return make_error(where_ + ": connect: " + std::strerror(err));
    return {};
  }

  // The socket that accepted this connection belongs to root. Its row in the socket tables (of
  // this process's network namespace, where the connection lives: /proc/net is /proc/self/net)
  // has an inode once the server accepted it; the kubelet accepts at once, so the tables are read
  // again until it does or the deadline passes.
  Result<void> check_served_by_root() {
    sockaddr_storage ours{}, theirs{};
    socklen_t ours_len = sizeof(ours), theirs_len = sizeof(theirs);
    if (getsockname(socket_->fd(), reinterpret_cast<sockaddr*>(&ours), &ours_len) != 0 ||
        getpeername(socket_->fd(), reinterpret_cast<sockaddr*>(&theirs), &theirs_len) != 0)
      return make_error(where_ + ": " + std::strerror(errno));
    auto client = tcp_endpoint_of(ours);
    auto server = tcp_endpoint_of(theirs);
    if (!client || !server) return make_error(where_ + ": not a TCP/IP connection");
    const host::HostFs proc("/");
    for (;;) {
      auto uid = host::find_tcp_socket_owner(proc, *server, *client);
      if (!uid)
        return make_error(where_ + ": not trusted: cannot tell which user serves it (" +
                          uid.error().message + ")");
      if (*uid && **uid == 0) return {};
      if (*uid)
        return make_error(fmt::format(
            "{}: not trusted: the socket serving it belongs to uid {}, not root (the kubelet "
            "runs as root); nothing is sent to it and its pods are not used",
            where_, **uid));
      if (deadline_.passed())
        return make_error(where_ + ": not trusted: the server did not accept the connection in " +
                          "time to tell which user it runs as");
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }

  // The TLS handshake; the serving certificate must verify against the endpoint's CA files.
  Result<void> start_tls() {
    ctx_.reset(SSL_CTX_new(TLS_client_method()));
    if (!ctx_) return make_error(where_ + ": TLS: " + ssl_error_text());
    SSL_CTX_set_min_proto_version(ctx_.get(), TLS1_2_VERSION);
    SSL_CTX_set_options(ctx_.get(), SSL_OP_IGNORE_UNEXPECTED_EOF);
    for (const std::string& file : endpoint_.ca_files)
      if (SSL_CTX_load_verify_locations(ctx_.get(), file.c_str(), nullptr) != 1)
        return make_error(
            fmt::format("{}: cannot load the CA file {}: {}", where_, file, ssl_error_text()));
    // A CA file may hold the kubelet's own certificate (self-signed, or a pinned leaf).
    X509_STORE_set_flags(SSL_CTX_get_cert_store(ctx_.get()), X509_V_FLAG_PARTIAL_CHAIN);
    SSL_CTX_set_verify(ctx_.get(), SSL_VERIFY_PEER, nullptr);
    ssl_.reset(SSL_new(ctx_.get()));
    if (!ssl_ || SSL_set_fd(ssl_.get(), socket_->fd()) != 1)
      return make_error(where_ + ": TLS: " + ssl_error_text());
    for (;;) {
      const int r = SSL_connect(ssl_.get());
      if (r == 1) break;
      const int e = SSL_get_error(ssl_.get(), r);
      if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
        if (!deadline_.wait(socket_->fd(), e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT))
          return deadline_.expired(where_);
        continue;
      }
      const long verify = SSL_get_verify_result(ssl_.get());
      if (verify != X509_V_OK)
        return make_error(fmt::format(
            "{}: not trusted: its certificate does not verify against {} ({}), so the token is "
            "not sent",
            where_, fmt::join(endpoint_.ca_files, ", "), X509_verify_cert_error_string(verify)));
      return make_error(where_ + ": TLS handshake: " + ssl_error_text());
    }
    return {};
  }

  Result<void> write_all(std::string_view data) {
    while (!data.empty()) {
      ssize_t n = 0;
      short wait_for = POLLOUT;
      if (ssl_) {
        const int r = SSL_write(ssl_.get(), data.data(), static_cast<int>(data.size()));
        if (r > 0) {
          n = r;
        } else {
          const int e = SSL_get_error(ssl_.get(), r);
          if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE)
            return make_error(where_ + ": send: " + ssl_error_text());
          if (e == SSL_ERROR_WANT_READ) wait_for = POLLIN;
        }
      } else {
        n = send(socket_->fd(), data.data(), data.size(), MSG_NOSIGNAL);
        if (n < 0 && errno != EAGAIN && errno != EINTR)
          return make_error(where_ + ": send: " + std::strerror(errno));
      }
      if (n > 0) {
        data.remove_prefix(static_cast<size_t>(n));
        continue;
      }
      if (!deadline_.wait(socket_->fd(), wait_for)) return deadline_.expired(where_);
    }
    return {};
  }

  // Appends what arrives next to `out` (at most `max` bytes); false at the end of the stream.
  Result<bool> read_some(std::string& out, size_t max) {
    std::array<char, 16 << 10> buf;
    const size_t want = std::min(max, buf.size());
    // A peer that always has bytes ready is held to the deadline too.
    if (deadline_.passed()) return deadline_.expired(where_);
    for (;;) {
      short wait_for = POLLIN;
      if (ssl_) {
        const int r = SSL_read(ssl_.get(), buf.data(), static_cast<int>(want));
        if (r > 0) {
          out.append(buf.data(), static_cast<size_t>(r));
          return true;
        }
        const int e = SSL_get_error(ssl_.get(), r);
        if (e == SSL_ERROR_ZERO_RETURN) return false;
        if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE)
          return make_error(where_ + ": receive: " + ssl_error_text());
        if (e == SSL_ERROR_WANT_WRITE) wait_for = POLLOUT;
      } else {
        const ssize_t n = recv(socket_->fd(), buf.data(), want, 0);
        if (n > 0) {
          out.append(buf.data(), static_cast<size_t>(n));
          return true;
        }
        if (n == 0) return false;
        if (errno != EAGAIN && errno != EINTR)
          return make_error(where_ + ": receive: " + std::strerror(errno));
      }
      if (!deadline_.wait(socket_->fd(), wait_for)) return deadline_.expired(where_);
    }
  }

 private:
  static std::optional<host::TcpEndpoint> tcp_endpoint_of(const sockaddr_storage& a) {
    std::array<char, INET6_ADDRSTRLEN> text{};
    if (a.ss_family == AF_INET) {
      const auto& v4 = reinterpret_cast<const sockaddr_in&>(a);
      inet_ntop(AF_INET, &v4.sin_addr, text.data(), text.size());
      return host::make_tcp_endpoint(text.data(), ntohs(v4.sin_port));
    }
    if (a.ss_family == AF_INET6) {
      const auto& v6 = reinterpret_cast<const sockaddr_in6&>(a);
      inet_ntop(AF_INET6, &v6.sin6_addr, text.data(), text.size());
      return host::make_tcp_endpoint(text.data(), ntohs(v6.sin6_port));
    }
    return std::nullopt;
  }

  const KubeletEndpoint& endpoint_;
  const std::string where_;
  const Deadline& deadline_;
  std::unique_ptr<Socket> socket_;
  std::unique_ptr<SSL_CTX, SslCtxFree> ctx_;
  std::unique_ptr<SSL, SslFree> ssl_;  // declared after ctx_: freed before it
};

// The answer to GET /pods read from `conn`: its status, and for a 200 the body (chunked, sized or
// up to the end of the stream), refused once it would pass kKubeletMaxBodyBytes. Bytes are taken
// from the connection only as they are consumed, so what is held is the body and one read.
class PodsAnswerReader {
 public:
  PodsAnswerReader(KubeletConnection& conn, std::string where)
      : conn_(conn), where_(std::move(where)) {}

  Result<int> read_head() {
    size_t end = std::string::npos;
    size_t searched = 0;  // where the end was looked for already (less the 3 bytes it may span)
    while ((end = in_.find("\r\n\r\n", searched)) == std::string::npos) {
      if (in_.size() > kKubeletMaxHeadBytes)
        return make_error(fmt::format("{}: the answer's headers are larger than {} KiB", where_,
                                      kKubeletMaxHeadBytes >> 10));
      searched = in_.size() < 3 ? 0 : in_.size() - 3;
      auto more = conn_.read_some(in_, kKubeletMaxHeadBytes);
      if (!more) return more.error();
      if (!*more) return make_error(where_ + ": the connection closed before an HTTP answer");
    }
    std::string_view head(in_.data(), end);
    pos_ = end + 4;
    auto lines = host::split_lines(head);
    if (lines.empty()) return make_error(where_ + ": not an HTTP answer");
    auto status_fields = host::split_fields(lines[0]);
    int status = 0;
    if (status_fields.size() < 2 || status_fields[0].rfind("HTTP/1.", 0) != 0 ||
        std::from_chars(status_fields[1].data(), status_fields[1].data() + status_fields[1].size(),
                        status)
                .ec != std::errc())
      return make_error(where_ + ": not an HTTP answer");
    for (size_t i = 1; i < lines.size(); ++i) {
      auto colon = lines[i].find(':');
      if (colon == std::string_view::npos) continue;
      const std::string name = to_lower(trim(lines[i].substr(0, colon)));
      const std::string value = to_lower(trim(lines[i].substr(colon + 1)));
      if (name == "transfer-encoding") {
        if (value != "chunked")
          return make_error(where_ + ": unsupported Transfer-Encoding " + value);
        chunked_ = true;
      } else if (name == "content-length") {
        size_t length = 0;
        if (std::from_chars(value.data(), value.data() + value.size(), length).ec != std::errc())
          return make_error(where_ + ": a malformed Content-Length");
        length_ = length;
      } else if (name == "content-encoding" && value != "identity") {
        return make_error(where_ + ": unsupported Content-Encoding " + value);
      }
    }
    return status;
  }

  Result<std::string> read_body() {
    std::string body;
    if (chunked_) {
      for (;;) {
        auto line = take_line();
        if (!line) return line.error();
        size_t size = 0;
        const std::string_view digits = std::string_view(*line).substr(0, line->find(';'));
        auto [p, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), size, 16);
        if (ec == std::errc::result_out_of_range) return too_large();
        if (ec != std::errc() || digits.empty()) return make_error(where_ + ": a malformed chunk");
        if (size == 0) return body;  // trailers are not read
        if (size > kKubeletMaxBodyBytes - body.size()) return too_large();
        if (auto r = take(body, size); !r) return r.error();
        auto crlf = take_line();
        if (!crlf) return crlf.error();
        if (!crlf->empty()) return make_error(where_ + ": a malformed chunk");
      }
    }
    if (length_) {
      if (*length_ > kKubeletMaxBodyBytes) return too_large();
      body.reserve(*length_);
      if (auto r = take(body, *length_); !r) return r.error();
      return body;
    }
    // Neither: the body runs to the end of the stream.
    for (;;) {
      body.append(in_, pos_);
      in_.clear();
      pos_ = 0;
      if (body.size() > kKubeletMaxBodyBytes) return too_large();
      auto more = conn_.read_some(in_, kKubeletMaxBodyBytes + 1 - body.size());
      if (!more) return more.error();
      if (!*more) return body;
    }
  }

 private:
  Error too_large() const {
    return make_error(
        fmt::format("{}: /pods is larger than {} MiB (a node's pods take far less); "
                    "not read",
                    where_, kKubeletMaxBodyBytes >> 20));
  }
  // Reads more when everything held was consumed; an error at the end of the stream.
  Result<void> refill() {
    if (pos_ < in_.size()) return {};
    in_.clear();
    pos_ = 0;
    auto more = conn_.read_some(in_, 16 << 10);
    if (!more) return more.error();
    if (!*more) return make_error(where_ + ": the connection closed in the middle of /pods");
    return {};
  }
  // Moves `n` bytes of the body to `out`.
  Result<void> take(std::string& out, size_t n) {
    while (n > 0) {
      if (auto r = refill(); !r) return r.error();
      const size_t chunk = std::min(n, in_.size() - pos_);
      out.append(in_, pos_, chunk);
      pos_ += chunk;
      n -= chunk;
    }
    return {};
  }
  // The next line (without its CRLF) of the chunked framing.
  Result<std::string> take_line() {
    std::string line;
    for (;;) {
      if (auto r = refill(); !r) return r.error();
      const size_t nl = in_.find('\n', pos_);
      const size_t stop = nl == std::string::npos ? in_.size() : nl;
      line.append(in_, pos_, stop - pos_);
      pos_ = nl == std::string::npos ? in_.size() : nl + 1;
      if (line.size() > 1024) return make_error(where_ + ": a malformed chunk");
      if (nl != std::string::npos) break;
    }
    if (!line.empty() && line.back() == '\r') line.pop_back();
    return line;
  }

  KubeletConnection& conn_;
  const std::string where_;
  std::string in_;  // bytes received and not yet consumed from pos_ on
  size_t pos_ = 0;
  bool chunked_ = false;
  std::optional<size_t> length_;
};

}  // namespace

std::string read_kubelet_token(const std::string& flag, const host::HostFs& fs, std::string& note) {
  if (!flag.empty()) {
    auto t = host::HostFs("/").read(flag, 64 << 10);
    if (!t) {
      note = "cannot read --kubelet-token-file " + flag + ": " + t.error().message;
      return {};
    }
    return std::string(trim(*t));
  }
  auto t = host::HostFs("/").read(kServiceAccountTokenFile, 64 << 10);
  if (!t && fs.root() != "/") t = fs.read(kServiceAccountTokenFile, 64 << 10);
  if (!t) {
    note = fmt::format("no service-account token at {}", kServiceAccountTokenFile);
    return {};
  }
  return std::string(trim(*t));
}

std::vector<std::string> kubelet_ca_files(const std::string& flag, const host::HostFs& fs) {
  if (!flag.empty()) return {flag};
  std::vector<std::string> out;
  const host::HostFs own("/");
  if (own.exists(kServiceAccountCaFile))
    out.push_back(std::string(kServiceAccountCaFile));
  else if (fs.root() != "/" && fs.exists(kServiceAccountCaFile))
    out.push_back(fs.path(kServiceAccountCaFile));
  for (std::string_view f : {kKubeletSelfSignedCertFile, kClusterCaFile})
    if (fs.exists(f)) out.push_back(fs.path(f));
  return out;
}

Result<std::vector<KubeletPod>> parse_pod_list(std::string_view body) {
  PodListReader reader;
  nlohmann::json::sax_parse(body.data(), body.data() + body.size(), &reader);
  return std::move(reader).result();
}

Result<std::vector<KubeletPod>> list_kubelet_pods(const KubeletEndpoint& endpoint,
                                                  std::chrono::milliseconds timeout) {
  auto body = fetch_kubelet_pods(endpoint, timeout);
  if (!body) return body.error();
  auto pods = parse_pod_list(*body);
  if (!pods) return make_error(endpoint.describe() + ": " + pods.error().message);
  return pods;
}

std::string KubeletEndpoint::describe() const {
  return fmt::format("{}://{}:{}", https ? "https" : "http", host, port);
}

Result<std::string> fetch_kubelet_pods(const KubeletEndpoint& endpoint,
                                       std::chrono::milliseconds timeout) {
  const std::string where = endpoint.describe();
  if (endpoint.https && endpoint.ca_files.empty())
    return make_error(where +
                      ": not trusted: no CA to verify its serving certificate against "
                      "(--kubelet-ca-file), so the token is not sent");
  const Deadline deadline(timeout);
  KubeletConnection conn(endpoint, deadline);
  if (auto r = conn.connect_to(); !r) return r.error();
  // Nothing is sent, and no handshake made, before the peer is known to be root's.
  if (auto r = conn.check_served_by_root(); !r) return r.error();
  if (endpoint.https)
    if (auto r = conn.start_tls(); !r) return r.error();
  std::string request = fmt::format(
      "GET /pods HTTP/1.1\r\nHost: {}:{}\r\nAccept: application/json\r\nUser-Agent: gpud\r\n"
      "Connection: close\r\n",
      endpoint.host.find(':') == std::string::npos ? endpoint.host : "[" + endpoint.host + "]",
      endpoint.port);
  if (endpoint.https && !endpoint.token.empty())
    request += "Authorization: Bearer " + endpoint.token + "\r\n";
  request += "\r\n";
  if (auto r = conn.write_all(request); !r) return r.error();
  PodsAnswerReader answer(conn, where);
  auto status = answer.read_head();
  if (!status) return status.error();
  if (*status != 200)
    return make_error(fmt::format("{}: /pods answered HTTP {}{}", where, *status,
                                  *status == 401 || *status == 403
                                      ? " (the token is not allowed to read the node's pods)"
                                      : ""));
  return answer.read_body();
}

std::vector<ContainerInfo> kubelet_containers(const std::vector<KubeletPod>& pods) {
  std::vector<ContainerInfo> out;
  for (const KubeletPod& p : pods)
    for (const KubeletContainer& c : p.containers)
      if (!c.id.empty())
        out.push_back({c.id, c.name, p.name, p.pod_namespace, p.uid, std::string(kKubeletSource)});
  return out;
}

std::vector<DeviceHolder> nvidia_device_holders(const std::vector<PodResources>& pods) {
  std::vector<DeviceHolder> out;
  for (const auto& p : pods)
    for (const auto& c : p.containers)
      for (const auto& d : c.devices) {
        if (d.resource_name.rfind("nvidia.com/", 0) != 0) continue;
        for (const auto& id : d.device_ids)
          out.push_back({id, d.resource_name, p.name, p.pod_namespace, c.name,
                         std::string(kPodResourcesSource)});
      }
  return out;
}

}  // namespace gpud::runtimes
