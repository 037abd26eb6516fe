#include "app/client.h"

#include <httplib.h>

namespace gpud::app {

ApiClient::ApiClient(std::string server) : server_(std::move(server)) {
  while (!server_.empty() && server_.back() == '/') server_.pop_back();
}

Result<ApiResponse> ApiClient::get(const std::string& path) const { return request("GET", path); }
Result<ApiResponse> ApiClient::post(const std::string& path) const { return request("POST", path); }

Result<ApiResponse> ApiClient::request(const std::string& method, const std::string& path) const {
  auto attempt = [&](const std::string& base) -> Result<ApiResponse> {
    httplib::Client cli(base);
    cli.enable_server_certificate_verification(false);  // the daemon's certificate is self-signed
    cli.set_connection_timeout(3, 0);
    cli.set_read_timeout(30, 0);
    httplib::Result res = method == "POST" ? cli.Post(path) : cli.Get(path);
    if (!res) return make_error(httplib::to_string(res.error()));
    return ApiResponse{res->status, res->body};
  };
  auto r = attempt(server_);
  // A daemon run with --no-tls answers plain HTTP; an SSL handshake failure means that.
  if (!r && server_.rfind("https://", 0) == 0 &&
      r.error().message.find("SSL") != std::string::npos) {
    auto plain = attempt("http://" + server_.substr(8));
    if (plain) return plain;
  }
  if (!r) return make_error("no gpud answering at " + server_ + " (" + r.error().message + ")");
  return r;
}

}  // namespace gpud::app
