#include "server/http_util.h"

#include <arpa/inet.h>
#include <httplib.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdio>
#include <utility>

#include "core/log.h"
#include "core/strings.h"

namespace gpud::server {
namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

}  // namespace

Result<ListenAddress> parse_listen_address(std::string_view address) {
  auto bad = [&](std::string_view why) {
    return make_error("invalid listen address \"" + std::string(address) +
                      "\": " + std::string(why));
  };
  std::string_view host;
  std::string_view port;
  if (!address.empty() && address.front() == '[') {
    auto close = address.find(']');
    if (close == std::string_view::npos) return bad("missing ']'");
    host = address.substr(1, close - 1);
    if (close + 1 >= address.size() || address[close + 1] != ':') return bad("missing port");
    port = address.substr(close + 2);
  } else {
    auto colon = address.rfind(':');
    if (colon == std::string_view::npos) return bad("missing port");
    host = address.substr(0, colon);
    port = address.substr(colon + 1);
    if (host.find(':') != std::string_view::npos)
      return bad("IPv6 hosts need brackets, e.g. [::1]:15132");
  }
  if (port.empty()) return bad("missing port");
  int p = -1;
  auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), p);
  if (ec != std::errc() || end != port.data() + port.size() || p < 0 || p > 65535)
    return bad("port must be 0-65535");
  ListenAddress out;
  out.host = host.empty() ? "0.0.0.0" : std::string(host);
  out.port = p;
  return out;
}

bool is_loopback(std::string_view remote_addr) {
  std::string addr(trim(remote_addr));
  if (addr.size() > 2 && addr.front() == '[' && addr.back() == ']')
    addr = addr.substr(1, addr.size() - 2);
  in_addr v4{};
  if (inet_pton(AF_INET, addr.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  in6_addr v6{};
  if (inet_pton(AF_INET6, addr.c_str(), &v6) != 1) return false;
  static const in6_addr kLoopback = IN6ADDR_LOOPBACK_INIT;
  if (std::equal(std::begin(v6.s6_addr), std::end(v6.s6_addr), std::begin(kLoopback.s6_addr)))
    return true;
  // IPv4-mapped (::ffff:a.b.c.d) on a dual-stack socket.
  const unsigned char* b = v6.s6_addr;
  bool mapped = std::all_of(b, b + 10, [](unsigned char x) { return x == 0; }) && b[10] == 0xff &&
                b[11] == 0xff;
  return mapped && b[12] == 127;
}

bool constant_time_equal(std::string_view a, std::string_view b) {
  // Walks the longer input fully so timing reveals only the lengths.
  size_t n = std::max(a.size(), b.size());
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < n; ++i) {
    unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff |= static_cast<unsigned char>(x ^ y);
  }
  return diff == 0;
}

bool bearer_token_matches(std::string_view authorization_header, std::string_view admin_token) {
  if (admin_token.empty()) return false;
  std::string_view h = trim(authorization_header);
  constexpr std::string_view kBearer = "bearer ";
  if (h.size() <= kBearer.size() || lower(h.substr(0, kBearer.size())) != kBearer) return false;
  return constant_time_equal(trim(h.substr(kBearer.size())), admin_token);
}

void set_body(httplib::Response& res, std::string body, const std::string& content_type) {
  res.body = std::move(body);
  auto previous = res.headers.equal_range("Content-Type");
  res.headers.erase(previous.first, previous.second);
  res.set_header("Content-Type", content_type);
}

std::string describe_peer(const httplib::Request& req) {
  if (req.remote_addr.empty()) return "local socket pid " + std::to_string(req.remote_port);
  bool v6 = req.remote_addr.find(':') != std::string::npos;
  return (v6 ? "[" + req.remote_addr + "]" : req.remote_addr) + ":" +
         std::to_string(req.remote_port);
}

Authorization authorize_mutation(std::string_view authorization_header,
                                 std::string_view admin_token, uint32_t daemon_uid,
                                 const std::function<Peer()>& identify_peer) {
  if (bearer_token_matches(authorization_header, admin_token)) return {true, "", "token"};
  Peer peer = identify_peer();
  if (peer.local_socket) return {true, "", "local socket"};
  if (peer.uid && (*peer.uid == 0 || *peer.uid == daemon_uid))
    return {true, "", "uid:" + std::to_string(*peer.uid)};

  std::string who = peer.uid ? "peer " + peer.address + " runs as uid " + std::to_string(*peer.uid)
                             : "cannot tell which user peer " + peer.address + " runs as (" +
                                   peer.unknown_uid_reason + ")";
  std::string need = "mutating requests need root (gpud's Unix socket, or TCP from loopback)";
  if (daemon_uid != 0) need += " or the daemon's user (uid " + std::to_string(daemon_uid) + ")";
  std::string token;
  if (admin_token.empty())
    token =
        " or the admin token, which this daemon does not have (--admin-token-file or "
        "GPUD_ADMIN_TOKEN)";
  else if (trim(authorization_header).empty())
    token = " or Authorization: Bearer <admin token>";
  else
    token = " or Authorization: Bearer <admin token>, and the given token is not it";
  return {false, who + ": " + need + token, ""};
}

Authorization authorize_remote_request(std::string_view remote_addr,
                                       std::string_view authorization_header,
                                       std::string_view admin_token, std::string_view peer) {
  if (is_loopback(remote_addr)) return {true, "", "loopback"};
  if (bearer_token_matches(authorization_header, admin_token)) return {true, "", "token"};
  std::string refusal = "peer " + std::string(peer) +
                        " is not on this host: requests from other hosts need Authorization: "
                        "Bearer <admin token> (--api-remote-reads-need-token)";
  if (admin_token.empty())
    refusal += ", and this daemon has no admin token (--admin-token-file or GPUD_ADMIN_TOKEN)";
  else if (!trim(authorization_header).empty())
    refusal += ", and the given token is not it";
  return {false, refusal, ""};
}

std::vector<std::string> split_list(std::string_view s) {
  std::vector<std::string> out;
  while (!s.empty()) {
    auto comma = s.find(',');
    auto item = trim(s.substr(0, comma));
    if (!item.empty()) out.emplace_back(item);
    if (comma == std::string_view::npos) break;
    s.remove_prefix(comma + 1);
  }
  return out;
}

std::string without_brotli(std::string_view accept_encoding) {
  std::string out;
  for (const auto& item : split_list(accept_encoding)) {
    if (lower(trim(std::string_view(item).substr(0, item.find(';')))) == "br") continue;
    out += (out.empty() ? "" : ", ") + item;
  }
  return out;
}

std::optional<std::string> content_type_error(std::string_view content_type) {
  // Parameters such as "; charset=utf-8" do not change the media type.
  std::string media = lower(trim(content_type.substr(0, content_type.find(';'))));
  if (media.empty() || media == "application/json") return std::nullopt;
  if (media == "application/yaml") return "yaml not supported";
  return "invalid content type";
}

nlohmann::json error_body(int code, std::string_view message) {
  return {{"code", code}, {"message", std::string(message)}};
}

bool json_indent_requested(const httplib::Request& req) {
  return lower(trim(req.get_header_value("json-indent"))) == "true";
}

void write_json(const httplib::Request& req, httplib::Response& res, int status,
                const nlohmann::json& body) {
  bool indent = json_indent_requested(req);
  res.status = status;
  // Plain "application/json" (no charset) is what httplib recognises as compressible.
  res.set_content(body.dump(indent ? 2 : -1, ' ', false, nlohmann::json::error_handler_t::replace),
                  "application/json");
}

void write_error(const httplib::Request& req, httplib::Response& res, int status,
                 std::string_view message) {
  write_json(req, res, status, error_body(status, message));
}

std::string escape_for_log(std::string_view s, size_t max_bytes) {
  std::string out;
  for (unsigned char c : s.substr(0, max_bytes)) {
    if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out.push_back(static_cast<char>(c));
    }
  }
  if (s.size() > max_bytes) out += "...";
  return out;
}

void answer_request_exception(const httplib::Request& req, httplib::Response& res,
                              std::exception_ptr ep, MetricRegistry* metrics) {
  std::string what = "unknown exception";
  try {
    if (ep) std::rethrow_exception(ep);
  } catch (const std::exception& e) {
    what = e.what();
  } catch (...) {
  }
  if (metrics != nullptr) metrics->add("", kRequestErrorsTotal, 1);
  logger("server")->error("{} {} failed: {}", escape_for_log(req.method), escape_for_log(req.path),
                          escape_for_log(what));
  write_error(req, res, 500, "internal error: " + what);
}

}  // namespace gpud::server
