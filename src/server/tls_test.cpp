#include "server/tls.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "host/network.h"

namespace gpud::server {
namespace {

std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct TempDir {
  std::filesystem::path path;
  TempDir() {
    char tmpl[] = "/tmp/gpud-tls-XXXXXX";
    path = ::mkdtemp(tmpl);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};

TEST(SubjectAltNames, IpAddressesDnsNamesAndNothingElse) {
  auto s = subject_alt_names(
      {"localhost", "127.0.0.1", "::1", "gpu-7.nodes.example", "*.nodes.example", "2001:db8::5"});
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(*s,
            "DNS:localhost,IP:127.0.0.1,IP:::1,DNS:gpu-7.nodes.example,DNS:*.nodes.example,"
            "IP:2001:db8::5");
  // A comma would smuggle another entry into OpenSSL's extension text.
  for (const char* bad : {"a,IP:10.0.0.1", "bad name", "", ".", "a..b", "x/y", "*."})
    EXPECT_FALSE(subject_alt_names({bad})) << bad;
}

// Prometheus verifies each node by the name or address it scrapes: the generated certificate covers
// the host name, the interface addresses and every --tls-san, and is kept (pinnable) while it does.
TEST(SelfSignedCertificate, CoversTheHostItsAddressesAndTlsSansAndIsKeptWhileItDoes) {
  TempDir dir;
  Config c;
  c.data_dir = dir.path.string();
  c.tls_sans = {"gpu-7.nodes.example", "10.9.8.7"};
  auto first = resolve_tls_material(c);
  ASSERT_TRUE(first) << first.error().message;
  char host[256] = {};
  ASSERT_EQ(::gethostname(host, sizeof host - 1), 0);
  std::vector<std::string> want = {"localhost", "127.0.0.1",           "::1",
                                   host,        "gpu-7.nodes.example", "10.9.8.7"};
  for (const std::string& a : host::interface_addresses()) want.push_back(a);
  EXPECT_TRUE(certificate_covers(first->cert_pem, want));
  EXPECT_FALSE(certificate_covers(first->cert_pem, {"other.example"}));
  EXPECT_FALSE(certificate_covers(first->cert_pem, {"10.9.8.8"}));

  // The same names: the kept certificate, byte for byte.
  auto again = resolve_tls_material(c);
  ASSERT_TRUE(again);
  EXPECT_EQ(again->cert_pem, first->cert_pem);
  // A new --tls-san: a new certificate that covers it, written where clients fetch it.
  c.tls_sans.push_back("gpu-7.other.example");
  auto more = resolve_tls_material(c);
  ASSERT_TRUE(more);
  EXPECT_NE(more->cert_pem, first->cert_pem);
  EXPECT_TRUE(certificate_covers(more->cert_pem, {"gpu-7.other.example", "10.9.8.7"}));
  EXPECT_EQ(slurp(dir.path / kCertFileName), more->cert_pem);
}

// An operator's own certificate is used as given, whatever names it covers.
TEST(SelfSignedCertificate, OperatorsCertificateIsNeverReplaced) {
  TempDir dir;
  auto own = generate_self_signed({"only.example"});
  ASSERT_TRUE(own);
  std::ofstream(dir.path / "own.crt") << own->cert_pem;
  std::ofstream(dir.path / "own.key") << own->key_pem;
  Config c;
  c.data_dir = dir.path.string();
  c.tls_cert = (dir.path / "own.crt").string();
  c.tls_key = (dir.path / "own.key").string();
  c.tls_sans = {"gpu-7.nodes.example"};
  auto m = resolve_tls_material(c);
  ASSERT_TRUE(m) << m.error().message;
  EXPECT_EQ(m->cert_pem, own->cert_pem);
}

}  // namespace
}  // namespace gpud::server
