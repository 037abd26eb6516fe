#include "app/client.h"

#include <httplib.h>
#include <netdb.h>
#include <openssl/x509.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>
#include <vector>

#include "app/api_replies.h"
#include "app/options.h"

namespace gpud::app {
namespace {

std::vector<std::string> data_dir_candidates(const ClientOptions& o) {
  if (!o.data_dir.empty()) return {o.data_dir};
  std::vector<std::string> dirs{default_data_dir()};
  if (dirs.front() != kSystemDataDir) dirs.emplace_back(kSystemDataDir);
  return dirs;
}

// A socket only root or this user could have made: anyone else's could be an impostor's.
bool trusted_socket(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0 && S_ISSOCK(st.st_mode) &&
         (st.st_uid == 0 || st.st_uid == ::geteuid());
}

Result<std::string> ca_for(const ClientOptions& o) {
  if (!o.ca_file.empty()) {
    if (::access(o.ca_file.c_str(), R_OK) != 0)
      return make_error("cannot read --ca " + o.ca_file + ": " + std::strerror(errno), kUntrusted);
    return o.ca_file;
  }
  for (const auto& dir : data_dir_candidates(o)) {
    std::string cert = dir + "/gpud.crt";
    if (::access(cert.c_str(), R_OK) == 0) return cert;
  }
  return std::string();  // the system's CAs: for an operator's certificate (--tls-cert)
}

std::string strip_slashes(std::string s) {
  while (!s.empty() && s.back() == '/') s.pop_back();
  return s;
}

// The errno of connecting to the endpoint ourselves (0: it connects now): httplib reports every
// failure to connect as "Connection", which cannot tell the user whether nothing listens there.
int connect_errno(const Endpoint& e) {
  auto attempt = [](int family, const sockaddr* addr, socklen_t len) {
    int fd = ::socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return errno;
    timeval tv{3, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    int err = ::connect(fd, addr, len) == 0 ? 0 : errno;
    ::close(fd);
    return err == EINPROGRESS ? ETIMEDOUT : err;
  };
  if (e.kind == Endpoint::Kind::kUnixSocket) {
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    if (e.address.size() >= sizeof addr.sun_path) return ENAMETOOLONG;
    std::memcpy(addr.sun_path, e.address.c_str(), e.address.size() + 1);
    return attempt(AF_UNIX, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  }
  // scheme://host[:port][/...], the host bracketed when it is IPv6.
  std::string rest =
      e.address.substr(e.address.find("://") == std::string::npos ? 0 : e.address.find("://") + 3);
  rest = rest.substr(0, rest.find('/'));
  std::string host = rest;
  std::string port = e.kind == Endpoint::Kind::kHttps ? "443" : "80";
  if (!rest.empty() && rest.front() == '[') {
    auto close = rest.find(']');
    host = rest.substr(1, close == std::string::npos ? std::string::npos : close - 1);
    if (close != std::string::npos && close + 1 < rest.size() && rest[close + 1] == ':')
      port = rest.substr(close + 2);
  } else if (auto colon = rest.rfind(':'); colon != std::string::npos) {
    host = rest.substr(0, colon);
    port = rest.substr(colon + 1);
  }
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(host.c_str(), port.c_str(), &hints, &found) != 0 || found == nullptr)
    return EHOSTUNREACH;
  int err = ECONNREFUSED;
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    err = attempt(a->ai_family, a->ai_addr, a->ai_addrlen);
    if (err == 0) break;
  }
  ::freeaddrinfo(found);
  return err;
}

// What failing to connect to `where` means, and what to do about it.
std::string no_daemon_message(int err, const std::string& where, bool unix_socket) {
  std::string what;
  switch (err) {
    case ECONNREFUSED: what = "connection refused at " + where; break;
    case ENOENT: what = "no socket at " + where; break;
    case ETIMEDOUT:
    case EAGAIN: what = "no answer within 3 s from " + where; break;
    case 0: what = "the connection to " + where + " failed, and a second attempt connected"; break;
    default: what = "cannot connect to " + where + ": " + std::strerror(err);
  }
  return what + "; start the daemon with `sudo gpud up` (or `gpud run`)" +
         (unix_socket ? "" : ", or give its address with --server URL");
}

}  // namespace

void add_client_flags(CLI::App& cmd, ClientOptions& o) {
  cmd.add_option("--server", o.server,
                 "The daemon's URL (default: its Unix socket when it exists, else " +
                     std::string(kDefaultServer) +
                     "); http:// only for a daemon run with --no-tls");
  cmd.add_option("--data-dir", o.data_dir,
                 "The daemon's data dir, where its socket (run/gpud.sock) and certificate "
                 "(gpud.crt) are (default: the `run` default, then /var/lib/gpud)");
  cmd.add_option("--api-socket", o.api_socket,
                 "The daemon's Unix socket (default <data-dir>/run/gpud.sock when it exists)");
  cmd.add_option("--ca", o.ca_file,
                 "PEM certificate(s) the daemon's HTTPS certificate must verify against (default "
                 "<data-dir>/gpud.crt when readable, else the system's CAs)");
}

std::string Endpoint::describe() const {
  return kind == Kind::kUnixSocket ? "unix:" + address : address;
}

Result<Endpoint> resolve_endpoint(const ClientOptions& o) {
  Endpoint e;
  if (!o.server.empty()) {
    e.address = strip_slashes(o.server);
    if (e.address.rfind("http://", 0) == 0) {
      e.kind = Endpoint::Kind::kHttp;
      return e;
    }
    if (e.address.rfind("https://", 0) != 0)
      return make_error("--server \"" + o.server +
                            "\" must be an https:// (or, for a daemon run "
                            "with --no-tls, http://) URL",
                        kUntrusted);
    auto ca = ca_for(o);
    if (!ca) return ca.error();
    e.kind = Endpoint::Kind::kHttps;
    e.ca_file = *ca;
    return e;
  }
  if (!o.api_socket.empty()) {
    e.kind = Endpoint::Kind::kUnixSocket;
    e.address = o.api_socket;
    return e;
  }
  for (const auto& dir : data_dir_candidates(o)) {
    std::string socket = default_api_socket(dir);
    if (trusted_socket(socket)) {
      e.kind = Endpoint::Kind::kUnixSocket;
      e.address = socket;
      return e;
    }
  }
  auto ca = ca_for(o);
  if (!ca) return ca.error();
  e.kind = Endpoint::Kind::kHttps;
  e.address = kDefaultServer;
  e.ca_file = *ca;
  return e;
}

ApiClient::ApiClient(Endpoint endpoint, std::string admin_token)
    : endpoint_(std::move(endpoint)), admin_token_(std::move(admin_token)) {}

Result<ApiResponse> ApiClient::get(const std::string& path) const { return request("GET", path); }
Result<ApiResponse> ApiClient::get_when_finished(const std::string& path,
                                                 std::chrono::milliseconds pause) const {
  while (true) {
    auto r = request("GET", path);
    if (!r || r->status != 202) return r;
    std::this_thread::sleep_for(pause);
  }
}

Result<ApiResponse> ApiClient::post(const std::string& path) const { return request("POST", path); }
Result<ApiResponse> ApiClient::del(const std::string& path) const {
  return request("DELETE", path);
}

Result<ApiResponse> ApiClient::request(const std::string& method, const std::string& path) const {
  const bool unix_socket = endpoint_.kind == Endpoint::Kind::kUnixSocket;
  // A Unix socket's path stands where httplib expects the host; the port is unused.
  httplib::Client cli =
      unix_socket ? httplib::Client(endpoint_.address, 80) : httplib::Client(endpoint_.address);
  if (!cli.is_valid())
    return make_error("cannot make a client for " + endpoint_.describe(), kUntrusted);
  if (unix_socket) cli.set_address_family(AF_UNIX);
  if (endpoint_.kind == Endpoint::Kind::kHttps) {
    cli.enable_server_certificate_verification(true);
    if (!endpoint_.ca_file.empty()) cli.set_ca_cert_path(endpoint_.ca_file);
  }
  if (!admin_token_.empty()) cli.set_bearer_token_auth(admin_token_);
  if (deadline_) {
    const auto left = std::chrono::duration_cast<std::chrono::microseconds>(
        *deadline_ - std::chrono::steady_clock::now());
    if (left.count() <= 0)
      return make_error("no time left for " + method + " " + path + " (deadline passed)",
                        kNoDaemon);
    const auto phase = std::max<int64_t>(left.count() / 3, 1);
    cli.set_connection_timeout(phase / 1000000, phase % 1000000);
    cli.set_write_timeout(phase / 1000000, phase % 1000000);
    cli.set_read_timeout(phase / 1000000, phase % 1000000);
  } else {
    cli.set_connection_timeout(3, 0);
    cli.set_read_timeout(30, 0);
  }
  httplib::Result res = method == "POST"     ? cli.Post(path)
                        : method == "DELETE" ? cli.Delete(path)
                                             : cli.Get(path);
  if (res) return ApiResponse{res->status, res->body};

  const std::string where = endpoint_.describe();
  const std::string trust = endpoint_.ca_file.empty() ? "the system's CAs" : endpoint_.ca_file;
  switch (res.error()) {
    case httplib::Error::Connection:
    case httplib::Error::ConnectionTimeout:
      return make_error(no_daemon_message(res.error() == httplib::Error::ConnectionTimeout
                                              ? ETIMEDOUT
                                              : connect_errno(endpoint_),
                                          where, unix_socket),
                        kNoDaemon);
    case httplib::Error::SSLServerVerification: {
      long v = cli.get_openssl_verify_result();
      std::string why = v == X509_V_OK ? "the certificate is not for this host name"
                                       : X509_verify_cert_error_string(v);
      return make_error("the server at " + where + " is not a gpud this CLI trusts: its " +
                            "certificate does not verify against " + trust + " (" + why +
                            "); give the daemon's certificate with --ca FILE or --data-dir DIR",
                        kUntrusted);
    }
    case httplib::Error::SSLConnection:
      return make_error("the TLS handshake with " + where +
                            " failed; a daemon run with --no-tls needs --server http://…",
                        kUntrusted);
    case httplib::Error::SSLLoadingCerts:
      return make_error("cannot load the certificates in " + trust, kUntrusted);
    default:
      return make_error(method + " " + where + path + " failed: " + httplib::to_string(res.error()),
                        kUntrusted);
  }
}

Result<ApiResponse> answered(Result<ApiResponse> r, const std::string& verb,
                             std::initializer_list<int> accepted) {
  if (!r && r.error().code == kNoDaemon)
    return make_error("gpud is not running: " + r.error().message, kNoDaemon);
  if (!r) return r;
  if (std::find(accepted.begin(), accepted.end(), r->status) == accepted.end())
    return make_error(verb + " refused (HTTP " + std::to_string(r->status) +
                      "): " + error_message(r->status, r->body));
  return r;
}

void add_admin_client_flags(CLI::App& cmd, ClientOptions& options, std::string& token_file) {
  add_client_flags(cmd, options);
  cmd.add_option("--admin-token-file", token_file,
                 "File with the daemon's admin token, for users other than root (or set "
                 "GPUD_ADMIN_TOKEN)");
}

Result<ApiClient> admin_client(const ClientOptions& options, const std::string& token_file) {
  auto token = resolve_admin_token(token_file, std::getenv(kAdminTokenEnv));
  if (!token) return token.error();
  auto endpoint = resolve_endpoint(options);
  if (!endpoint) return endpoint.error();
  return ApiClient(*endpoint, *token);
}

}  // namespace gpud::app
