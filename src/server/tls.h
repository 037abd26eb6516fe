// TLS material for the API: the operator's certificate, or a self-signed one persisted in the data
// dir so that clients can pin it across restarts.
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "core/config.h"
#include "core/result.h"

namespace httplib {
class Server;
}
struct ssl_ctx_st;

namespace gpud::server {

inline constexpr const char* kCertFileName = "gpud.crt";
inline constexpr const char* kKeyFileName = "gpud.key";

// The TLS 1.2 cipher suites the server accepts (Mozilla "intermediate", ECDHE only).
inline constexpr const char* kTls12Ciphers =
    "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:"
    "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:"
    "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305";

struct TlsMaterial {
  std::string cert_pem;
  std::string key_pem;
  std::string source;  // where it came from, for the startup log line
  // What resolving it did that the daemon's log says (a certificate generated again, one kept in
  // memory only), in order; the caller logs them, so a helper process's lines reach the log too.
  struct LogLine {
    bool warning = false;
    std::string text;
  };
  std::vector<LogLine> log;
};

// The names a generated certificate covers: localhost, 127.0.0.1, ::1, the host name, the host's
// interface addresses (so Prometheus can verify each node by the name or address it scrapes) and
// --tls-san's; each once, in that order.
std::vector<std::string> self_signed_names(const Config& config);
// "DNS:a,IP:1.2.3.4,..." for the subjectAltName extension; an error naming a value that is neither
// an IP address nor a DNS name (letters, digits, '-', '.', a leading "*.").
[[nodiscard]] Result<std::string> subject_alt_names(const std::vector<std::string>& names);
// Whether the certificate's SANs cover every name (X509_check_host / X509_check_ip_asc).
bool certificate_covers(const std::string& cert_pem, const std::vector<std::string>& names);
// A fresh ECDSA P-256 self-signed certificate: CN=gpud, the given SANs, serverAuth, 10 years.
[[nodiscard]] Result<TlsMaterial> generate_self_signed(const std::vector<std::string>& names = {
                                                           "localhost", "127.0.0.1", "::1"});
// Reads and validates a PEM certificate and key (they must parse and belong together).
[[nodiscard]] Result<TlsMaterial> load_tls_material(const std::string& cert_path,
                                                    const std::string& key_path);
// Checks that cert_pem and key_pem parse and that the key matches the certificate.
[[nodiscard]] Result<void> validate_tls_material(const TlsMaterial& m);
// config.tls_cert/tls_key when given (errors are fatal); else <data_dir>/gpud.crt + gpud.key,
// created on first use (key 0600, cert 0644) for self_signed_names(config), and generated again
// when the kept one no longer covers them (a new --tls-san, a renamed host); else (no data dir, or
// it is not writable) a certificate kept in memory only.
[[nodiscard]] Result<TlsMaterial> resolve_tls_material(const Config& config);
struct SslCtxFree {
  void operator()(ssl_ctx_st* ctx) const;
};
using SslCtxPtr = std::unique_ptr<ssl_ctx_st, SslCtxFree>;
// An OpenSSL server context serving the material, with make_tls_server's protocols and suites, for
// the API's own connection handling (server/connection_loop.h).
[[nodiscard]] Result<SslCtxPtr> make_tls_context(const TlsMaterial& m);

// The daemon's TLS material without OpenSSL in the daemon: `<helper> tls-material` (gpud's own
// binary, app/tls_material_cmd.cpp) resolves it as resolve_tls_material does (reading, checking or
// generating and persisting the certificate) and prints it. Parsing certificates and keys fetches
// OpenSSL's decoders and algorithms: about 1.5 MiB of the daemon's resident memory (measured) that
// stays mapped for good, for a context the daemon may never use (the metrics port and the local
// socket are plain HTTP). The material's errors are the helper's (a bad --tls-cert fails the start
// with resolve_tls_material's words); a helper that cannot be run, or whose reply is not one,
// is an error with the code kTlsHelperBroken, which the server answers by resolving in process.
inline constexpr int kTlsHelperBroken = 502;
[[nodiscard]] Result<TlsMaterial> resolve_tls_material_in_helper(
    const Config& config, const std::string& helper,
    std::chrono::milliseconds timeout = std::chrono::seconds(30));
// The arguments after `<helper>` that make it resolve config's material: "tls-material" and the
// flags that resolve_tls_material reads (data dir, certificate and key, --tls-san).
std::vector<std::string> tls_helper_arguments(const Config& config);
// The helper's reply on stdout: the material (source, log lines, certificate, key), or the error
// that resolving it met, each field length-prefixed; parse_tls_helper_reply reads it back.
std::string format_tls_helper_reply(const Result<TlsMaterial>& material);
// The material or the resolving error of a well-formed reply; an error with code kTlsHelperBroken
// for anything else.
[[nodiscard]] Result<TlsMaterial> parse_tls_helper_reply(std::string_view reply);

// The server context, made from the material at the first connection that needs it (get), so that
// a daemon never asked for HTTPS never parses its certificate. The material was checked when it
// was resolved; a context that still cannot be made is an error for every call, and the material
// is dropped once the context is made (the key is not kept twice).
class LazyTlsContext {
 public:
  explicit LazyTlsContext(TlsMaterial material);
  // A made context, for tests and callers that have one already.
  explicit LazyTlsContext(SslCtxPtr ctx);
  ~LazyTlsContext();
  LazyTlsContext(const LazyTlsContext&) = delete;
  LazyTlsContext& operator=(const LazyTlsContext&) = delete;
  [[nodiscard]] Result<ssl_ctx_st*> get();
  // Whether the context has been made (tests).
  bool made() const;

 private:
  mutable std::mutex mu_;
  TlsMaterial material_;
  SslCtxPtr ctx_;
  std::string error_;
};

// An httplib::SSLServer serving the material: TLS 1.2 or 1.3, TLS 1.2 limited to kTls12Ciphers.
[[nodiscard]] Result<std::unique_ptr<httplib::Server>> make_tls_server(const TlsMaterial& m);

}  // namespace gpud::server
