#include "sinks/kubernetes_api.h"

#include <fmt/format.h>
#include <httplib.h>
#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include "core/files.h"
#include "core/strings.h"

namespace gpud::sinks {
namespace {

struct BioDeleter {
  void operator()(BIO* b) const { BIO_free(b); }
};
using BioPtr = std::unique_ptr<BIO, BioDeleter>;
struct X509Deleter {
  void operator()(X509* x) const { X509_free(x); }
};
using X509Ptr = std::unique_ptr<X509, X509Deleter>;
struct KeyDeleter {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
using KeyPtr = std::unique_ptr<EVP_PKEY, KeyDeleter>;
struct StoreDeleter {
  void operator()(X509_STORE* s) const { X509_STORE_free(s); }
};
using StorePtr = std::unique_ptr<X509_STORE, StoreDeleter>;

BioPtr memory_bio(const std::string& pem) {
  return BioPtr(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
}

// Every certificate in `pem`; an error when there is none.
Result<StorePtr> ca_store(const std::string& pem) {
  StorePtr store(X509_STORE_new());
  BioPtr bio = memory_bio(pem);
  if (!store || !bio) return make_error("out of memory reading the CA certificates");
  int added = 0;
  while (X509* raw = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)) {
    X509Ptr cert(raw);
    if (X509_STORE_add_cert(store.get(), cert.get()) == 1) ++added;
  }
  if (added == 0) return make_error("the CA data holds no PEM certificate");
  return store;
}

// Whether `server` is http:// (plain) or https://, and the host and port.
struct ServerUrl {
  bool tls = true;
  std::string host;
  int port = 443;
};

Result<ServerUrl> parse_server(const std::string& server) {
  ServerUrl u;
  std::string_view rest = server;
  if (rest.rfind("https://", 0) == 0) {
    rest.remove_prefix(8);
  } else if (rest.rfind("http://", 0) == 0) {
    rest.remove_prefix(7);
    u.tls = false;
    u.port = 80;
  } else {
    return make_error("the server \"" + server + "\" is not an http:// or https:// URL");
  }
  while (!rest.empty() && rest.back() == '/') rest.remove_suffix(1);
  if (rest.find('/') != std::string_view::npos)
    return make_error("the server \"" + server + "\" has a path; only a host and port are used");
  std::string_view host = rest;
  std::string_view port;
  if (!rest.empty() && rest.front() == '[') {  // [v6]:port
    size_t close = rest.find(']');
    if (close == std::string_view::npos) return make_error("bad IPv6 server \"" + server + "\"");
    host = rest.substr(1, close - 1);
    if (close + 1 < rest.size() && rest[close + 1] == ':') port = rest.substr(close + 2);
  } else if (size_t colon = rest.rfind(':'); colon != std::string_view::npos) {
    host = rest.substr(0, colon);
    port = rest.substr(colon + 1);
  }
  if (host.empty()) return make_error("the server \"" + server + "\" names no host");
  u.host = std::string(host);
  if (!port.empty()) {
    int p = 0;
    for (char c : port) {
      if (c < '0' || c > '9' || p > 65535) return make_error("bad port in \"" + server + "\"");
      p = p * 10 + (c - '0');
    }
    if (p < 1 || p > 65535) return make_error("bad port in \"" + server + "\"");
    u.port = p;
  }
  return u;
}

// What a failed answer says: the Status object's message where the server sent one, else the
// start of the body.
std::string answer_text(const std::string& body) {
  auto j = nlohmann::json::parse(body, nullptr, false);
  if (j.is_object() && j.contains("message") && j["message"].is_string())
    return j["message"].get<std::string>();
  std::string text = body.substr(0, 200);
  for (char& c : text)
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) c = '?';
  return text.empty() ? "(empty answer)" : text;
}

}  // namespace

KubernetesApi::KubernetesApi(KubernetesConnection conn, std::unique_ptr<httplib::ClientImpl> client)
    : conn_(std::move(conn)), client_(std::move(client)) {}

KubernetesApi::~KubernetesApi() = default;

Result<std::unique_ptr<KubernetesApi>> KubernetesApi::create(KubernetesConnection conn,
                                                             std::chrono::milliseconds timeout) {
  auto url = parse_server(conn.server);
  if (!url) return url.error();
  std::unique_ptr<httplib::ClientImpl> client;
  if (url->tls) {
    X509Ptr cert;
    KeyPtr key;
    if (!conn.client_cert_pem.empty() || !conn.client_key_pem.empty()) {
      BioPtr cb = memory_bio(conn.client_cert_pem);
      BioPtr kb = memory_bio(conn.client_key_pem);
      cert.reset(PEM_read_bio_X509(cb.get(), nullptr, nullptr, nullptr));
      key.reset(PEM_read_bio_PrivateKey(kb.get(), nullptr, nullptr, nullptr));
      if (!cert) return make_error("the client certificate is not a PEM certificate");
      if (!key) return make_error("the client key is not a PEM private key");
    }
    auto ssl =
        cert ? std::make_unique<httplib::SSLClient>(url->host, url->port, cert.get(), key.get())
             : std::make_unique<httplib::SSLClient>(url->host, url->port);
    if (!ssl->is_valid()) return make_error("cannot set up TLS for " + conn.server);
    if (conn.insecure_skip_tls_verify) {
      ssl->enable_server_certificate_verification(false);
    } else {
      ssl->enable_server_certificate_verification(true);
      if (!conn.ca_pem.empty()) {
        auto store = ca_store(conn.ca_pem);
        if (!store) return store.error();
        ssl->set_ca_cert_store(store->release());  // the client's SSL context owns it now
      }
    }
    client = std::move(ssl);
  } else {
    client = std::make_unique<httplib::ClientImpl>(url->host, url->port);
  }
  using std::chrono::duration_cast;
  using std::chrono::microseconds;
  using std::chrono::seconds;
  auto split = [](std::chrono::milliseconds d) {
    auto s = duration_cast<seconds>(d);
    return std::pair<time_t, time_t>(s.count(), duration_cast<microseconds>(d - s).count());
  };
  auto [sec, usec] = split(timeout);
  client->set_connection_timeout(sec, usec);
  client->set_read_timeout(sec, usec);
  client->set_write_timeout(sec, usec);
  client->set_keep_alive(true);
  return std::unique_ptr<KubernetesApi>(new KubernetesApi(std::move(conn), std::move(client)));
}

Result<std::string> KubernetesApi::bearer_token() const {
  if (conn_.token_file.empty()) return conn_.token;
  auto text = read_file(conn_.token_file);
  if (!text) return make_error("cannot read the token: " + text.error().message);
  return std::string(trim(*text));
}

Result<nlohmann::json> KubernetesApi::call(std::string_view method, const std::string& path,
                                           std::string_view content_type, const std::string& body) {
  const std::string what = fmt::format("{} {}", method, path);
  {
    std::lock_guard lock(mu_);
    if (stopped_) return make_error(what + ": stopping");
  }
  auto token = bearer_token();
  if (!token) return make_error(what + ": " + token.error().message);
  httplib::Headers headers{{"Accept", "application/json"}, {"User-Agent", "gpud"}};
  if (!token->empty()) headers.emplace("Authorization", "Bearer " + *token);
  const std::string type(content_type);
  if (method != "GET" && method != "PATCH" && method != "POST")
    return make_error(what + ": unsupported method");
  httplib::Result r = method == "GET" ? client_->Get(path.c_str(), headers)
                      : method == "PATCH"
                          ? client_->Patch(path.c_str(), headers, body, type.c_str())
                          : client_->Post(path.c_str(), headers, body, type.c_str());
  if (!r) {
    std::string reason = httplib::to_string(r.error());
    if (r.error() == httplib::Error::SSLServerVerification)
      reason += " (the server's certificate is not signed by the configured CA)";
    return make_error(fmt::format("{}: no answer from {}: {}", what, conn_.server, reason), 0);
  }
  if (r->status < 200 || r->status > 299)
    return make_error(fmt::format("{}: HTTP {}: {}", what, r->status, answer_text(r->body)),
                      r->status);
  auto j = nlohmann::json::parse(r->body, nullptr, false);
  if (!j.is_object())
    return make_error(fmt::format("{}: HTTP {} but the answer is not a JSON object: {}", what,
                                  r->status, answer_text(r->body)),
                      r->status);
  return j;
}

void KubernetesApi::stop() {
  {
    std::lock_guard lock(mu_);
    stopped_ = true;
  }
  client_->stop();
}

}  // namespace gpud::sinks
