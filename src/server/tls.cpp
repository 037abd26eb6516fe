#include "server/tls.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <httplib.h>
#include <openssl/bn.h>
#include <openssl/crypto.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include "core/files.h"
#include "host/command.h"
#include "host/network.h"

namespace gpud::server {
namespace {

namespace fs = std::filesystem;

struct BioFree {
  void operator()(BIO* b) const { BIO_free(b); }
};
struct X509Free {
  void operator()(X509* x) const { X509_free(x); }
};
struct PkeyFree {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
struct BnFree {
  void operator()(BIGNUM* b) const { BN_free(b); }
};
struct NameFree {
  void operator()(X509_NAME* n) const { X509_NAME_free(n); }
};
struct ExtFree {
  void operator()(X509_EXTENSION* e) const { X509_EXTENSION_free(e); }
};
using BioPtr = std::unique_ptr<BIO, BioFree>;
using X509Ptr = std::unique_ptr<X509, X509Free>;
using PkeyPtr = std::unique_ptr<EVP_PKEY, PkeyFree>;
using BnPtr = std::unique_ptr<BIGNUM, BnFree>;
using ExtPtr = std::unique_ptr<X509_EXTENSION, ExtFree>;

std::string openssl_error() {
  unsigned long e = ERR_get_error();
  ERR_clear_error();
  if (e == 0) return "unknown OpenSSL error";
  char buf[256];
  ERR_error_string_n(e, buf, sizeof buf);
  return buf;
}

std::string bio_to_string(BIO* bio) {
  char* data = nullptr;
  long n = BIO_get_mem_data(bio, &data);
  return n > 0 ? std::string(data, static_cast<size_t>(n)) : std::string();
}

X509Ptr parse_cert(const std::string& pem) {
  BioPtr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  if (!bio) return nullptr;
  return X509Ptr(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
}

PkeyPtr parse_key(const std::string& pem) {
  BioPtr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  if (!bio) return nullptr;
  return PkeyPtr(PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr));
}

// Writes via a temporary file and rename, so a crash never leaves half a key behind.
Result<void> write_file(const fs::path& path, const std::string& data, mode_t mode) {
  std::string tmp = path.string() + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd < 0) return make_error("cannot create " + tmp + ": " + std::strerror(errno));
  size_t off = 0;
  while (off < data.size()) {
    ssize_t n = ::write(fd, data.data() + off, data.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      std::string err = std::strerror(errno);
      ::close(fd);
      ::unlink(tmp.c_str());
      return make_error("cannot write " + tmp + ": " + err);
    }
    off += static_cast<size_t>(n);
  }
  ::fchmod(fd, mode);  // the umask may have narrowed it
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    ::unlink(tmp.c_str());
    return make_error("cannot write " + tmp + ": " + std::strerror(errno));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    std::string err = std::strerror(errno);
    ::unlink(tmp.c_str());
    return make_error("cannot rename " + tmp + ": " + err);
  }
  return {};
}

Result<void> add_ext(X509* cert, int nid, const char* value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, cert, cert, nullptr, nullptr, 0);
  ExtPtr ext(X509V3_EXT_conf_nid(nullptr, &ctx, nid, value));
  if (!ext || X509_add_ext(cert, ext.get(), -1) != 1)
    return make_error(std::string("cannot add certificate extension ") + value + ": " +
                      openssl_error());
  return {};
}

}  // namespace

std::vector<std::string> self_signed_names(const Config& config) {
  std::vector<std::string> names = {"localhost", "127.0.0.1", "::1"};
  auto add = [&](std::string n) {
    if (!n.empty() && std::find(names.begin(), names.end(), n) == names.end())
      names.push_back(std::move(n));
  };
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) == 0 && subject_alt_names({host})) add(host);
  for (const std::string& a : host::interface_addresses()) add(a);
  for (const std::string& n : config.tls_sans) add(n);
  return names;
}

Result<std::string> subject_alt_names(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) {
    unsigned char buf[sizeof(struct in6_addr)];
    std::string entry;
    if (::inet_pton(AF_INET, n.c_str(), buf) == 1 || ::inet_pton(AF_INET6, n.c_str(), buf) == 1) {
      entry = "IP:" + n;
    } else {
      std::string_view v = n;
      if (v.substr(0, 2) == "*.") v.remove_prefix(2);
      const bool ok = !v.empty() && n.size() <= 253 && v.front() != '.' && v.back() != '.' &&
                      v.find("..") == std::string_view::npos &&
                      std::all_of(v.begin(), v.end(), [](char c) {
                        return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.';
                      });
      if (!ok)
        return make_error("\"" + n +
                          "\" is neither an IP address nor a DNS name (letters, digits, '-', '.')");
      entry = "DNS:" + n;
    }
    out += (out.empty() ? "" : ",") + entry;
  }
  return out;
}

bool certificate_covers(const std::string& cert_pem, const std::vector<std::string>& names) {
  X509Ptr cert = parse_cert(cert_pem);
  if (!cert) return false;
  for (const std::string& n : names) {
    unsigned char buf[sizeof(struct in6_addr)];
    const bool ip =
        ::inet_pton(AF_INET, n.c_str(), buf) == 1 || ::inet_pton(AF_INET6, n.c_str(), buf) == 1;
    const int r = ip ? X509_check_ip_asc(cert.get(), n.c_str(), 0)
                     : X509_check_host(cert.get(), n.c_str(), n.size(), 0, nullptr);
    if (r != 1) {
      ERR_clear_error();
      return false;
    }
  }
  return true;
}

Result<TlsMaterial> generate_self_signed(const std::vector<std::string>& names) {
  auto sans = subject_alt_names(names);
  if (!sans) return sans.error();
  PkeyPtr key(EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", "P-256"));
  if (!key) return make_error("cannot generate ECDSA P-256 key: " + openssl_error());
  X509Ptr cert(X509_new());
  if (!cert) return make_error("cannot allocate certificate: " + openssl_error());
  X509_set_version(cert.get(), X509_VERSION_3);

  // A random positive 127-bit serial, as RFC 5280 recommends for uniqueness.
  BnPtr serial(BN_new());
  if (!serial || BN_rand(serial.get(), 127, BN_RAND_TOP_ANY, BN_RAND_BOTTOM_ANY) != 1 ||
      BN_to_ASN1_INTEGER(serial.get(), X509_get_serialNumber(cert.get())) == nullptr)
    return make_error("cannot set certificate serial: " + openssl_error());

  // An hour of slack for clients whose clocks run behind.
  constexpr long kTenYearsDays = 3650;
  if (X509_gmtime_adj(X509_getm_notBefore(cert.get()), -3600) == nullptr ||
      X509_time_adj_ex(X509_getm_notAfter(cert.get()), kTenYearsDays, 0, nullptr) == nullptr)
    return make_error("cannot set certificate validity: " + openssl_error());

  X509_NAME* name = X509_get_subject_name(cert.get());
  auto add_name = [&](const char* field, const char* value) {
    return X509_NAME_add_entry_by_txt(name, field, MBSTRING_ASC,
                                      reinterpret_cast<const unsigned char*>(value), -1, -1,
                                      0) == 1;
  };
  if (!add_name("O", "gpud") || !add_name("CN", "gpud") ||
      X509_set_issuer_name(cert.get(), name) != 1)
    return make_error("cannot set certificate name: " + openssl_error());
  if (X509_set_pubkey(cert.get(), key.get()) != 1)
    return make_error("cannot set certificate key: " + openssl_error());

  for (auto [nid, value] :
       {std::pair{NID_basic_constraints, "critical,CA:FALSE"},
        std::pair{NID_key_usage, "critical,digitalSignature"},
        std::pair{NID_ext_key_usage, "serverAuth"}, std::pair{NID_subject_alt_name, sans->c_str()},
        std::pair{NID_subject_key_identifier, "hash"}}) {
    if (auto r = add_ext(cert.get(), nid, value); !r) return r.error();
  }
  if (X509_sign(cert.get(), key.get(), EVP_sha256()) == 0)
    return make_error("cannot sign certificate: " + openssl_error());

  BioPtr cert_bio(BIO_new(BIO_s_mem()));
  BioPtr key_bio(BIO_new(BIO_s_mem()));
  if (!cert_bio || !key_bio || PEM_write_bio_X509(cert_bio.get(), cert.get()) != 1 ||
      PEM_write_bio_PrivateKey(key_bio.get(), key.get(), nullptr, nullptr, 0, nullptr, nullptr) !=
          1)
    return make_error("cannot encode certificate: " + openssl_error());
  return TlsMaterial{
      bio_to_string(cert_bio.get()), bio_to_string(key_bio.get()), "self-signed, in memory", {}};
}

Result<void> validate_tls_material(const TlsMaterial& m) {
  X509Ptr cert = parse_cert(m.cert_pem);
  if (!cert) return make_error("not a PEM certificate: " + openssl_error());
  PkeyPtr key = parse_key(m.key_pem);
  if (!key) return make_error("not a PEM private key: " + openssl_error());
  if (X509_check_private_key(cert.get(), key.get()) != 1) {
    ERR_clear_error();
    return make_error("private key does not match the certificate");
  }
  return {};
}

Result<TlsMaterial> load_tls_material(const std::string& cert_path, const std::string& key_path) {
  auto cert = read_file(cert_path);
  if (!cert) return make_error("TLS certificate: " + cert.error().message);
  auto key = read_file(key_path);
  if (!key) return make_error("TLS key: " + key.error().message);
  TlsMaterial m{std::move(*cert), std::move(*key), cert_path, {}};
  if (auto r = validate_tls_material(m); !r)
    return make_error("TLS certificate " + cert_path + " / key " + key_path + ": " +
                      r.error().message);
  return m;
}

Result<TlsMaterial> resolve_tls_material(const Config& config) {
  if (!config.tls_cert.empty() || !config.tls_key.empty()) {
    if (config.tls_cert.empty() || config.tls_key.empty())
      return make_error("--tls-cert and --tls-key must be given together");
    return load_tls_material(config.tls_cert, config.tls_key);
  }
  const std::vector<std::string> names = self_signed_names(config);
  if (config.data_dir.empty()) return generate_self_signed(names);

  fs::path dir(config.data_dir);
  fs::path cert_path = dir / kCertFileName;
  fs::path key_path = dir / kKeyFileName;
  std::error_code ec;
  std::vector<TlsMaterial::LogLine> log;
  if (fs::exists(cert_path, ec) && fs::exists(key_path, ec)) {
    auto loaded = load_tls_material(cert_path.string(), key_path.string());
    if (loaded && certificate_covers(loaded->cert_pem, names)) return loaded;
    if (loaded)
      log.push_back({false, cert_path.string() +
                                " does not cover every name the daemon answers to (" +
                                std::to_string(names.size()) +
                                " names); generating a new self-signed certificate (clients that "
                                "pinned the old one need the new gpud.crt)"});
    else
      log.push_back({true, loaded.error().message + "; generating a new self-signed certificate"});
  }
  auto generated = generate_self_signed(names);
  if (!generated) return generated;
  generated->log = std::move(log);
  fs::create_directories(dir, ec);
  auto wrote = write_file(key_path, generated->key_pem, 0600);
  if (wrote) wrote = write_file(cert_path, generated->cert_pem, 0644);
  if (!wrote) {
    generated->log.push_back({true, "cannot persist the self-signed certificate (" +
                                        wrote.error().message + "); using it in memory only"});
    return generated;
  }
  generated->source = cert_path.string() + " (self-signed, generated)";
  generated->log.push_back({false, "generated self-signed certificate " + cert_path.string()});
  return generated;
}

namespace {

// Mozilla's "intermediate" profile: TLS 1.2 only with forward-secret AEAD suites (no CBC, no SHA-1
// MACs, no static RSA); TLS 1.3's suites are all AEAD and stay OpenSSL's default.
Result<void> restrict_protocols(SSL_CTX* ctx) {
  if (SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) != 1 ||
      SSL_CTX_set_cipher_list(ctx, kTls12Ciphers) != 1)
    return make_error("cannot restrict the TLS cipher suites: " + openssl_error());
  return {};
}

}  // namespace

void SslCtxFree::operator()(ssl_ctx_st* ctx) const { SSL_CTX_free(ctx); }

Result<SslCtxPtr> make_tls_context(const TlsMaterial& m) {
  X509Ptr cert = parse_cert(m.cert_pem);
  PkeyPtr key = parse_key(m.key_pem);
  if (!cert || !key) return make_error("invalid TLS material: " + openssl_error());
  SslCtxPtr ctx(SSL_CTX_new(TLS_server_method()));
  if (!ctx) return make_error("cannot set up TLS: " + openssl_error());
  SSL_CTX_set_options(ctx.get(),
                      SSL_OP_NO_COMPRESSION | SSL_OP_NO_SESSION_RESUMPTION_ON_RENEGOTIATION);
  // Writes resume after EAGAIN with the same data; idle connections keep no read/write buffers.
  SSL_CTX_set_mode(ctx.get(), SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER |
                                  SSL_MODE_RELEASE_BUFFERS);
  // SSL_CTX_use_certificate/PrivateKey take their own references, so ours are freed on return.
  if (SSL_CTX_use_certificate(ctx.get(), cert.get()) != 1 ||
      SSL_CTX_use_PrivateKey(ctx.get(), key.get()) != 1 ||
      SSL_CTX_check_private_key(ctx.get()) != 1)
    return make_error("cannot set up TLS: " + openssl_error());
  if (auto r = restrict_protocols(ctx.get()); !r) return r.error();
  return ctx;
}

Result<std::unique_ptr<httplib::Server>> make_tls_server(const TlsMaterial& m) {
  X509Ptr cert = parse_cert(m.cert_pem);
  PkeyPtr key = parse_key(m.key_pem);
  if (!cert || !key) return make_error("invalid TLS material: " + openssl_error());
  // SSL_CTX_use_certificate/PrivateKey take their own references, so ours are freed on return.
  auto server = std::make_unique<httplib::SSLServer>(cert.get(), key.get());
  if (!server->is_valid()) return make_error("cannot set up TLS: " + openssl_error());
  if (auto r = restrict_protocols(server->ssl_context()); !r) return r.error();
  return std::unique_ptr<httplib::Server>(std::move(server));
}

std::vector<std::string> tls_helper_arguments(const Config& config) {
  std::vector<std::string> args = {"tls-material", "--data-dir", config.data_dir};
  if (!config.tls_cert.empty()) args.insert(args.end(), {"--tls-cert", config.tls_cert});
  if (!config.tls_key.empty()) args.insert(args.end(), {"--tls-key", config.tls_key});
  for (const std::string& san : config.tls_sans) args.insert(args.end(), {"--tls-san", san});
  return args;
}

namespace {

constexpr std::string_view kReplyHeader = "gpud-tls-material 1\n";

void add_field(std::string& out, std::string_view tag, std::string_view value) {
  out.append(tag).append(" ").append(std::to_string(value.size())).append("\n");
  out.append(value).append("\n");
}

Error broken_reply(std::string_view why) {
  return make_error("the TLS helper's reply is not one (" + std::string(why) + ")",
                    kTlsHelperBroken);
}

}  // namespace

std::string format_tls_helper_reply(const Result<TlsMaterial>& material) {
  std::string out(kReplyHeader);
  if (!material) {
    add_field(out, "error", material.error().message);
    return out;
  }
  add_field(out, "source", material->source);
  for (const TlsMaterial::LogLine& line : material->log)
    add_field(out, line.warning ? "warn" : "info", line.text);
  add_field(out, "cert", material->cert_pem);
  add_field(out, "key", material->key_pem);
  return out;
}

Result<TlsMaterial> parse_tls_helper_reply(std::string_view reply) {
  if (reply.substr(0, kReplyHeader.size()) != kReplyHeader) return broken_reply("no header");
  reply.remove_prefix(kReplyHeader.size());
  TlsMaterial m;
  bool has_cert = false, has_key = false;
  std::optional<std::string> error;
  while (!reply.empty()) {
    const size_t space = reply.find(' ');
    const size_t eol = reply.find('\n');
    if (space == std::string_view::npos || eol == std::string_view::npos || eol < space)
      return broken_reply("a field without its length");
    const std::string_view tag = reply.substr(0, space);
    const std::string_view len_text = reply.substr(space + 1, eol - space - 1);
    size_t len = 0;
    auto [end, ec] = std::from_chars(len_text.data(), len_text.data() + len_text.size(), len);
    if (ec != std::errc() || end != len_text.data() + len_text.size() || len_text.empty())
      return broken_reply("a length that is not a number");
    reply.remove_prefix(eol + 1);
    if (len >= reply.size() || reply[len] != '\n') return broken_reply("a field cut short");
    std::string value(reply.substr(0, len));
    reply.remove_prefix(len + 1);
    if (tag == "error") {
      error = std::move(value);
    } else if (tag == "source") {
      m.source = std::move(value);
    } else if (tag == "info" || tag == "warn") {
      m.log.push_back({tag == "warn", std::move(value)});
    } else if (tag == "cert") {
      m.cert_pem = std::move(value);
      has_cert = true;
    } else if (tag == "key") {
      m.key_pem = std::move(value);
      has_key = true;
    } else {
      return broken_reply("an unknown field");
    }
  }
  if (error) return make_error(std::move(*error));
  if (!has_cert || !has_key) return broken_reply("no certificate or no key");
  return m;
}

Result<TlsMaterial> resolve_tls_material_in_helper(const Config& config, const std::string& helper,
                                                   std::chrono::milliseconds timeout) {
  std::vector<std::string> argv = {helper};
  for (std::string& a : tls_helper_arguments(config)) argv.push_back(std::move(a));
  // A reply is two PEM blocks and a few lines; a megabyte is far past any real one.
  constexpr size_t kMaxReply = size_t{1} << 20;
  auto r = host::run_command(argv, host::kDefaultSearchPath, timeout, kMaxReply);
  if (!r) return make_error("cannot run the TLS helper: " + r.error().message, kTlsHelperBroken);
  if (r->exit_code != 0) {
    std::string err = r->err.substr(0, 300);
    return make_error(
        "the TLS helper " +
            (r->exit_code < 0 ? std::string("was killed by a signal")
                              : "exited with status " + std::to_string(r->exit_code)) +
            (err.empty() ? std::string() : ": " + err),
        kTlsHelperBroken);
  }
  if (r->discarded_bytes > 0) return broken_reply("longer than 1 MiB");
  return parse_tls_helper_reply(r->out);
}

LazyTlsContext::LazyTlsContext(TlsMaterial material) : material_(std::move(material)) {}
LazyTlsContext::LazyTlsContext(SslCtxPtr ctx) : ctx_(std::move(ctx)) {}
LazyTlsContext::~LazyTlsContext() = default;

Result<ssl_ctx_st*> LazyTlsContext::get() {
  std::lock_guard lock(mu_);
  if (ctx_) return ctx_.get();
  if (!error_.empty()) return make_error(error_);
  auto made = make_tls_context(material_);
  if (!made) {
    error_ = made.error().message;
    return made.error();
  }
  ctx_ = std::move(*made);
  // The context holds the key now; the PEM copies go.
  OPENSSL_cleanse(material_.key_pem.data(), material_.key_pem.size());
  material_ = TlsMaterial{};
  return ctx_.get();
}

bool LazyTlsContext::made() const {
  std::lock_guard lock(mu_);
  return ctx_ != nullptr;
}

}  // namespace gpud::server
