// Request-independent helpers of the API server: listen-address parsing, the loopback/token rule
// for mutating endpoints, query-list splitting, content negotiation and the JSON error body.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

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

// The rule for mutating endpoints: loopback peers always; others only with "Authorization: Bearer
// <token>" matching a non-empty admin token.
bool authorized(std::string_view remote_addr, std::string_view authorization_header,
                std::string_view admin_token);

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

// Writes body as application/json, indented when the request has "json-indent: true".
void write_json(const httplib::Request& req, httplib::Response& res, int status,
                const nlohmann::json& body);
void write_error(const httplib::Request& req, httplib::Response& res, int status,
                 std::string_view message);

}  // namespace gpud::server
