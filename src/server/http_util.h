// Request-independent helpers of the API server: listen-address parsing, the authorization rule
// for mutating endpoints, query-list splitting, content negotiation and the JSON error body.
#pragma once

#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/log.h"
#include "core/metrics.h"
#include "core/result.h"

namespace httplib {
struct Request;
struct Response;
}  // namespace httplib

namespace gpud::server {

struct ListenAddress {
  std::string host;  // without brackets; "0.0.0.0" for ":port"
  int port = 0;
};

// Parses "host:port", "[::1]:port" or ":port". An unbracketed host must not contain ':'.
[[nodiscard]] Result<ListenAddress> parse_listen_address(std::string_view address);

// Whether a peer address (as httplib reports it) is loopback: 127.0.0.0/8, ::1, ::ffff:127.x.x.x.
bool is_loopback(std::string_view remote_addr);

// Compares in time that depends only on the lengths, so a token cannot be guessed byte by byte.
bool constant_time_equal(std::string_view a, std::string_view b);

// Whether an Authorization header is "Bearer <admin_token>" for a non-empty admin token.
bool bearer_token_matches(std::string_view authorization_header, std::string_view admin_token);

// Who sent a request, as far as the server can tell.
struct Peer {
  // Came through the daemon's Unix socket. Only root and the daemon's own user can connect to it:
  // it is mode 0600 in a 0700 directory owned by the daemon's user (httplib 0.11 hands handlers
  // neither the socket nor the peer's uid, so the file system guarantees the peer instead).
  bool local_socket = false;
  // TCP from loopback: the owner of the client's end of the connection (the socket tables).
  std::optional<uint32_t> uid;
  std::string unknown_uid_reason;  // why uid is unset (not loopback, lookup failed)
  std::string address;             // for messages: "127.0.0.1:54321"
};

struct Authorization {
  bool allowed = false;
  std::string refusal;  // the 403 message when not allowed
  // Who was allowed, as set-healthy records it: "token", "uid:<n>", or "local socket" (the
  // socket's peer has no uid the server can read; only root or the daemon's user can connect).
  std::string principal;
};

// The request header through which the server hands an allowed mutation's principal to its
// handler; the server replaces whatever a client sent in it.
inline constexpr const char* kPrincipalHeader = "X-Gpud-Principal";

// The Prometheus text exposition's content type.
inline constexpr const char* kPrometheusContentType = "text/plain; version=0.0.4; charset=utf-8";
// The response's body and Content-Type, the body moved in: httplib's set_content copies it, and a
// scrape's text (0.1 MiB with eight GPUs) held twice was the largest part of the daemon's peak
// heap.
void set_body(httplib::Response& res, std::string body, const std::string& content_type);

// "127.0.0.1:54321", "[::1]:54321", or for the Unix socket (no address) "local socket pid 123"
// (httplib reports the peer's pid, from SO_PEERCRED, as its port there).
std::string describe_peer(const httplib::Request& req);

// The rule for mutating requests: a valid bearer token; else a peer on the daemon's Unix socket;
// else a peer whose uid is root or the daemon's own (a user who can already stop and edit the
// daemon gains nothing). `identify_peer` runs only when the token does not settle it.
Authorization authorize_mutation(std::string_view authorization_header,
                                 std::string_view admin_token, uint32_t daemon_uid,
                                 const std::function<Peer()>& identify_peer);

// The rule for every request under --api-remote-reads-need-token: a peer that is not loopback
// (`remote_addr` as httplib reports it) needs a valid bearer token, whatever it asks; loopback
// peers need nothing here (mutations still follow authorize_mutation). `refusal` is the 401
// message.
Authorization authorize_remote_request(std::string_view remote_addr,
                                       std::string_view authorization_header,
                                       std::string_view admin_token, std::string_view peer);

// Splits "a, b,,c" into {"a","b","c"}.
std::vector<std::string> split_list(std::string_view s);

// Drops "br" from an Accept-Encoding list ("gzip, deflate, br" -> "gzip, deflate"). Debian's
// httplib prefers brotli whenever a client offers it (every browser does) and compresses at
// brotli's slowest quality: seconds for a few hundred KiB of JSON. Without "br" it answers gzip.
std::string without_brotli(std::string_view accept_encoding);

// GPUd's content negotiation on read endpoints: empty or application/json is fine; application/yaml
// gets "yaml not supported" (we do not encode YAML); anything else "invalid content type". nullopt:
// accepted.
std::optional<std::string> content_type_error(std::string_view content_type);

nlohmann::json error_body(int code, std::string_view message);

// The client asked for indented JSON (GPUd's "json-indent: true" header).
bool json_indent_requested(const httplib::Request& req);
// Writes body as application/json, indented when the request has "json-indent: true".
void write_json(const httplib::Request& req, httplib::Response& res, int status,
                const nlohmann::json& body);
void write_error(const httplib::Request& req, httplib::Response& res, int status,
                 std::string_view message);

// Client-supplied text made safe for one log line: control characters as \xNN, cut at max_bytes.
std::string escape_for_log(std::string_view s, size_t max_bytes = 256);

inline constexpr std::string_view kRequestErrorsTotal = "gpud_http_request_errors_total";
// The boundary of one request: whatever its handler threw becomes a 500 with the reason, a count
// in gpud_http_request_errors_total (when `metrics` is given) and one log line whose path has its
// control characters escaped; the worker thread goes on with the next request.
void answer_request_exception(const httplib::Request& req, httplib::Response& res,
                              std::exception_ptr ep, MetricRegistry* metrics);

}  // namespace gpud::server
