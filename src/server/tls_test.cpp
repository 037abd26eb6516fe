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
  // What happened is for the daemon's log: the kept one did not cover the names, a new one was
  // written.
  ASSERT_EQ(more->log.size(), 2u);
  EXPECT_FALSE(more->log[0].warning);
  EXPECT_NE(more->log[0].text.find("does not cover every name"), std::string::npos);
  EXPECT_NE(more->log[1].text.find("generated self-signed certificate"), std::string::npos);
  EXPECT_TRUE(again->log.empty());
}

// A kept key that no longer parses is replaced, and the daemon's log says why, as a warning.
TEST(SelfSignedCertificate, AKeptKeyThatDoesNotParseIsReplacedWithAWarning) {
  TempDir dir;
  Config c;
  c.data_dir = dir.path.string();
  ASSERT_TRUE(resolve_tls_material(c));
  std::ofstream(dir.path / kKeyFileName) << "garbled\n";
  auto m = resolve_tls_material(c);
  ASSERT_TRUE(m) << m.error().message;
  ASSERT_FALSE(m->log.empty());
  EXPECT_TRUE(m->log[0].warning);
  EXPECT_NE(m->log[0].text.find("not a PEM private key"), std::string::npos) << m->log[0].text;
  EXPECT_TRUE(validate_tls_material(*m));
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

// The helper's reply carries the material whole, its log lines in order, or the error in the
// resolver's words.
TEST(TlsHelperReply, RoundTripsTheMaterialAndTheError) {
  auto m = generate_self_signed();
  ASSERT_TRUE(m);
  m->source = "/var/lib/gpud/gpud.crt (self-signed, generated)";
  m->log = {{true, "a warning\nwith a newline"}, {false, "generated self-signed certificate x"}};
  auto back = parse_tls_helper_reply(format_tls_helper_reply(*m));
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(back->cert_pem, m->cert_pem);
  EXPECT_EQ(back->key_pem, m->key_pem);
  EXPECT_EQ(back->source, m->source);
  ASSERT_EQ(back->log.size(), 2u);
  EXPECT_TRUE(back->log[0].warning);
  EXPECT_EQ(back->log[0].text, "a warning\nwith a newline");
  EXPECT_FALSE(back->log[1].warning);

  Result<TlsMaterial> failed = make_error("TLS certificate /x: not a PEM certificate");
  auto err = parse_tls_helper_reply(format_tls_helper_reply(failed));
  ASSERT_FALSE(err);
  EXPECT_EQ(err.error().message, "TLS certificate /x: not a PEM certificate");
  EXPECT_NE(err.error().code, kTlsHelperBroken);
}

// Anything else is a broken helper (its own code), never material or a resolver's error.
TEST(TlsHelperReply, AnythingElseIsABrokenHelper) {
  auto m = generate_self_signed();
  ASSERT_TRUE(m);
  const std::string good = format_tls_helper_reply(*m);
  for (const std::string& reply :
       {std::string(), std::string("hello\n"), std::string("gpud-tls-material 2\n"),
        good.substr(0, good.size() - 1), good.substr(0, good.size() / 2),
        std::string("gpud-tls-material 1\ncert 5\nabc\n"),
        std::string("gpud-tls-material 1\ncert x\nabc\n"),
        std::string("gpud-tls-material 1\ncert -1\nabc\n"),
        std::string("gpud-tls-material 1\ncert 99999999999999999999999\n"),
        std::string("gpud-tls-material 1\ncert 18446744073709551615\nabc\n"),
        std::string("gpud-tls-material 1\nsource 1\na\n"),
        std::string("gpud-tls-material 1\nshell 2\nls\n"), good + "x"}) {
    auto r = parse_tls_helper_reply(reply);
    ASSERT_FALSE(r) << reply;
    EXPECT_EQ(r.error().code, kTlsHelperBroken) << reply;
  }
}

// A helper program: a shell script in a temporary directory.
std::string write_helper(const TempDir& dir, const std::string& body) {
  const std::string path = (dir.path / "helper").string();
  std::ofstream(path) << "#!/bin/sh\n" << body;
  std::filesystem::permissions(path, std::filesystem::perms::owner_all);
  return path;
}

// The daemon's side: the material as the helper printed it, the helper's error as the resolver's
// error, and a helper that cannot run or answers nonsense as a broken helper (which the server
// answers by resolving in process).
TEST(TlsHelper, TakesTheReplyAndTellsABrokenHelperApart) {
  TempDir dir;
  auto m = generate_self_signed();
  ASSERT_TRUE(m);
  m->log = {{false, "generated self-signed certificate y"}};
  std::ofstream(dir.path / "reply") << format_tls_helper_reply(*m);
  Config c;
  c.data_dir = "/var/lib/gpud";
  c.tls_sans = {"gpu-1.example", "10.0.0.1"};
  // The helper sees the flags resolve_tls_material reads.
  auto got = resolve_tls_material_in_helper(
      c, write_helper(dir, "echo \"$@\" >" + (dir.path / "argv").string() + "\ncat " +
                               (dir.path / "reply").string() + "\n"));
  ASSERT_TRUE(got) << got.error().message;
  EXPECT_EQ(got->key_pem, m->key_pem);
  ASSERT_EQ(got->log.size(), 1u);
  EXPECT_EQ(slurp(dir.path / "argv"),
            "tls-material --data-dir /var/lib/gpud --tls-san gpu-1.example --tls-san 10.0.0.1\n");

  auto refused = resolve_tls_material_in_helper(
      c, write_helper(dir, "printf 'gpud-tls-material 1\\nerror 12\\nbad key file\\n'\n"));
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().message, "bad key file");
  EXPECT_NE(refused.error().code, kTlsHelperBroken);

  auto failed = resolve_tls_material_in_helper(c, write_helper(dir, "echo oops >&2\nexit 3\n"));
  ASSERT_FALSE(failed);
  EXPECT_EQ(failed.error().code, kTlsHelperBroken);
  EXPECT_NE(failed.error().message.find("exited with status 3: oops"), std::string::npos)
      << failed.error().message;

  auto garbage = resolve_tls_material_in_helper(c, write_helper(dir, "echo hello\n"));
  ASSERT_FALSE(garbage);
  EXPECT_EQ(garbage.error().code, kTlsHelperBroken);

  auto missing = resolve_tls_material_in_helper(c, (dir.path / "no-such-helper").string());
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code, kTlsHelperBroken);

  auto slow = resolve_tls_material_in_helper(c, write_helper(dir, "sleep 30\n"),
                                             std::chrono::milliseconds(200));
  ASSERT_FALSE(slow);
  EXPECT_EQ(slow.error().code, kTlsHelperBroken);
}

// The context is made at the first get(), not before; the same one after; material that makes
// none is an error at every get().
TEST(LazyTlsContext, IsMadeAtTheFirstGet) {
  auto m = generate_self_signed();
  ASSERT_TRUE(m);
  LazyTlsContext lazy(std::move(*m));
  EXPECT_FALSE(lazy.made());
  auto first = lazy.get();
  ASSERT_TRUE(first) << first.error().message;
  EXPECT_TRUE(lazy.made());
  auto second = lazy.get();
  ASSERT_TRUE(second);
  EXPECT_EQ(*first, *second);

  LazyTlsContext broken(TlsMaterial{"not a certificate", "not a key", "test", {}});
  EXPECT_FALSE(broken.get());
  auto again = broken.get();
  ASSERT_FALSE(again);
  EXPECT_NE(again.error().message.find("invalid TLS material"), std::string::npos)
      << again.error().message;
  EXPECT_FALSE(broken.made());
}

}  // namespace
}  // namespace gpud::server
