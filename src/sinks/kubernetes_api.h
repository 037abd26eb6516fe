// KubernetesApi: the few calls to a Kubernetes API server that the node-condition sink makes (GET
// and PATCH a Node, POST an Event), with the credentials app/ resolved (service account or
// kubeconfig), a deadline on every call, and an error that says what the server answered.
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "core/result.h"

namespace httplib {
class ClientImpl;
}

namespace gpud::sinks {

// How to reach the API server and who to be there. Filled by app/ from the pod's service account
// or from a kubeconfig; every PEM is the text itself, not a path.
struct KubernetesConnection {
  std::string server;  // "https://10.0.0.1:443" (http:// is accepted for tests and proxies)
  std::string ca_pem;  // the API server's CA; "" with https: the system's trust store
  bool insecure_skip_tls_verify = false;
  std::string token;       // a bearer token
  std::string token_file;  // read before each call when set (the kubelet rotates bound tokens)
  std::string client_cert_pem;
  std::string client_key_pem;
  std::string where;  // where this came from ("service account", "kubeconfig FILE"), for errors
};

class KubernetesApi {
 public:
  // Checks the URL and loads the certificates; an error says which part is wrong.
  [[nodiscard]] static Result<std::unique_ptr<KubernetesApi>> create(
      KubernetesConnection conn, std::chrono::milliseconds timeout);
  ~KubernetesApi();
  KubernetesApi(const KubernetesApi&) = delete;
  KubernetesApi& operator=(const KubernetesApi&) = delete;

  // One call. `content_type` is "" for a GET. Success: the answer's JSON object. Failure: the
  // HTTP status (as the error's code; 0 without an answer) and "<METHOD> <path>: <what>", where
  // <what> is the Status object's message, the transport error or "the answer is not JSON".
  [[nodiscard]] Result<nlohmann::json> call(std::string_view method, const std::string& path,
                                            std::string_view content_type = {},
                                            const std::string& body = {});
  // Interrupts a call in flight (from another thread) and refuses the next ones; for shutdown.
  void stop();
  const std::string& server() const { return conn_.server; }

 private:
  KubernetesApi(KubernetesConnection conn, std::unique_ptr<httplib::ClientImpl> client);
  Result<std::string> bearer_token() const;

  KubernetesConnection conn_;
  std::mutex mu_;  // guards stopped_ against stop()
  bool stopped_ = false;
  std::unique_ptr<httplib::ClientImpl> client_;
};

}  // namespace gpud::sinks
