// ApiClient: talks to a running gpud for `status` and `set-healthy` (HTTPS with the self-signed
// certificate, falling back to plain HTTP for daemons started with --no-tls).
#pragma once

#include <string>

#include "core/result.h"

namespace gpud::app {

inline constexpr const char* kDefaultServer = "https://localhost:15132";

struct ApiResponse {
  int status = 0;
  std::string body;
};

class ApiClient {
 public:
  explicit ApiClient(std::string server);
  Result<ApiResponse> get(const std::string& path) const;
  Result<ApiResponse> post(const std::string& path) const;

 private:
  Result<ApiResponse> request(const std::string& method, const std::string& path) const;
  std::string server_;
};

}  // namespace gpud::app
