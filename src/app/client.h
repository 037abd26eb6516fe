// ApiClient: how `status` and `set-healthy` reach the local daemon, and only it: through its Unix
// socket when there is one, else over HTTPS with the daemon's certificate verified. Plain HTTP only
// when asked for with an http:// --server (a daemon run with --no-tls); never as a fallback.
#pragma once

#include <CLI/CLI.hpp>
#include <chrono>
#include <initializer_list>
#include <optional>
#include <string>

#include "core/result.h"

namespace gpud::app {

inline constexpr const char* kDefaultServer = "https://localhost:15132";
// Where the system daemon keeps its data dir (and so its socket and certificate), for users whose
// own default data dir is elsewhere.
inline constexpr const char* kSystemDataDir = "/var/lib/gpud";

// The CLI's flags for reaching the daemon.
struct ClientOptions {
  std::string server;       // --server; "": the Unix socket when present, else kDefaultServer
  std::string data_dir;     // --data-dir; "": default_data_dir(), then kSystemDataDir
  std::string api_socket;   // --api-socket; "": <data-dir>/run/gpud.sock when it exists
  std::string ca_file;      // --ca; "": <data-dir>/gpud.crt when readable, else the system's CAs
  std::string admin_token;  // sent as "Authorization: Bearer" when set
};

// Adds --server, --data-dir, --api-socket and --ca.
void add_client_flags(CLI::App& cmd, ClientOptions& options);

// The way a request travels.
struct Endpoint {
  enum class Kind { kUnixSocket, kHttps, kHttp };
  Kind kind = Kind::kHttps;
  std::string address;  // the socket's path, or the base URL
  std::string ca_file;  // kHttps: what the daemon's certificate must chain to; "": system CAs
  std::string describe() const;  // "unix:/var/lib/gpud/run/gpud.sock", "https://localhost:15132"
};

// Picks the endpoint: --server when given; else --api-socket when given; else the first data dir
// whose socket exists and belongs to root or this user; else kDefaultServer.
[[nodiscard]] Result<Endpoint> resolve_endpoint(const ClientOptions& options);

// Error codes of failed requests (Error::code), which the verbs turn into exit codes.
inline constexpr int kNoDaemon = 1;   // nothing accepts connections there
inline constexpr int kUntrusted = 2;  // something answered, but not as a daemon this CLI trusts

struct ApiResponse {
  int status = 0;
  std::string body;
};

class ApiClient {
 public:
  ApiClient(Endpoint endpoint, std::string admin_token);
  const Endpoint& endpoint() const { return endpoint_; }
  // Every later request ends by this time: its connect, write and read each get a third of what
  // is left (default: 3 s to connect, 30 s to read).
  void set_deadline(std::chrono::steady_clock::time_point deadline) { deadline_ = deadline; }
  Result<ApiResponse> get(const std::string& path) const;
  // GETs a trigger (trigger-check, trigger-tag) again, `pause` apart, while the daemon answers 202
  // (its checks still run after the daemon's bounded wait; each request joins them): the answer
  // once they finished, or whatever else the daemon answered.
  Result<ApiResponse> get_when_finished(const std::string& path,
                                        std::chrono::milliseconds pause) const;
  Result<ApiResponse> post(const std::string& path) const;
  Result<ApiResponse> del(const std::string& path) const;  // DELETE

 private:
  Result<ApiResponse> request(const std::string& method, const std::string& path) const;
  Endpoint endpoint_;
  std::string admin_token_;
  std::optional<std::chrono::steady_clock::time_point> deadline_;
};

// A verb's request as it turned out: the response when the daemon answered with one of
// `accepted`, else the message to print: "gpud is not running: …", the transport's error, or
// "<verb> refused (HTTP n): <the daemon's message>".
[[nodiscard]] Result<ApiResponse> answered(Result<ApiResponse> r, const std::string& verb,
                                           std::initializer_list<int> accepted = {200});

// How often trigger-check and run-plugin-group ask again while the daemon's checks still run.
inline constexpr std::chrono::milliseconds kTriggerPollInterval{1000};

// Adds add_client_flags' flags and --admin-token-file, for verbs that change the daemon's state.
void add_admin_client_flags(CLI::App& cmd, ClientOptions& options, std::string& token_file);
// The client of such a verb: the endpoint, and the admin token from the file, else
// $GPUD_ADMIN_TOKEN (none for root over the local socket).
[[nodiscard]] Result<ApiClient> admin_client(const ClientOptions& options,
                                             const std::string& token_file);

}  // namespace gpud::app
