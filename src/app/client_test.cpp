#include "app/client.h"

#include <gtest/gtest.h>
#include <httplib.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include "app/options.h"
#include "server/tls.h"

namespace gpud::app {
namespace {

namespace fs = std::filesystem;

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "gpud-client-test-XXXXXX").string();
    path_ = ::mkdtemp(tmpl.data());
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  std::string path() const { return path_; }

 private:
  std::string path_;
};

// A socket file nobody accepts on: enough for the client to find it.
void make_socket_file(const std::string& path) {
  fs::create_directories(fs::path(path).parent_path());
  int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strcpy(addr.sun_path, path.c_str());
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ::close(fd);
}

TEST(ClientEndpoint, PrefersTheDaemonsSocketThenHttpsWithItsCertificate) {
  TempDir dir;
  ClientOptions o;
  o.data_dir = dir.path();
  auto none = resolve_endpoint(o);
  ASSERT_TRUE(none) << none.error().message;
  EXPECT_EQ(none->kind, Endpoint::Kind::kHttps);
  EXPECT_EQ(none->address, kDefaultServer);
  EXPECT_EQ(none->ca_file, "") << "no certificate in the data dir: the system's CAs";

  std::ofstream(dir.path() + "/gpud.crt") << "pem";
  auto pinned = resolve_endpoint(o);
  ASSERT_TRUE(pinned);
  EXPECT_EQ(pinned->kind, Endpoint::Kind::kHttps);
  EXPECT_EQ(pinned->ca_file, dir.path() + "/gpud.crt");

  make_socket_file(default_api_socket(dir.path()));
  auto local = resolve_endpoint(o);
  ASSERT_TRUE(local);
  EXPECT_EQ(local->kind, Endpoint::Kind::kUnixSocket);
  EXPECT_EQ(local->address, dir.path() + "/run/gpud.sock");
  EXPECT_EQ(local->describe(), "unix:" + dir.path() + "/run/gpud.sock");

  if (::geteuid() == 0) {
    // A socket another user made could be an impostor's: not used.
    ASSERT_EQ(::chown(local->address.c_str(), 65534, 65534), 0);
    auto skipped = resolve_endpoint(o);
    ASSERT_TRUE(skipped);
    EXPECT_EQ(skipped->kind, Endpoint::Kind::kHttps);
  }
}

TEST(ClientEndpoint, ExplicitServerSocketAndCaWin) {
  TempDir dir;
  std::ofstream(dir.path() + "/gpud.crt") << "pem";
  std::ofstream(dir.path() + "/other.crt") << "pem";
  make_socket_file(default_api_socket(dir.path()));
  ClientOptions o;
  o.data_dir = dir.path();
  o.server = "https://127.0.0.1:15132/";
  auto https = resolve_endpoint(o);
  ASSERT_TRUE(https);
  EXPECT_EQ(https->kind, Endpoint::Kind::kHttps);
  EXPECT_EQ(https->address, "https://127.0.0.1:15132");
  EXPECT_EQ(https->ca_file, dir.path() + "/gpud.crt");
  o.ca_file = dir.path() + "/other.crt";
  EXPECT_EQ(resolve_endpoint(o)->ca_file, dir.path() + "/other.crt");

  o.server = "http://127.0.0.1:15132";
  EXPECT_EQ(resolve_endpoint(o)->kind, Endpoint::Kind::kHttp);
  o.server = "127.0.0.1:15132";
  auto schemeless = resolve_endpoint(o);
  ASSERT_FALSE(schemeless);
  EXPECT_EQ(schemeless.error().code, kUntrusted);

  o.server = "";
  o.api_socket = "/elsewhere/gpud.sock";
  auto socket = resolve_endpoint(o);
  ASSERT_TRUE(socket);
  EXPECT_EQ(socket->kind, Endpoint::Kind::kUnixSocket);
  EXPECT_EQ(socket->address, "/elsewhere/gpud.sock");

  ClientOptions missing_ca;
  missing_ca.data_dir = dir.path() + "/nothing";
  missing_ca.ca_file = dir.path() + "/missing.crt";
  auto r = resolve_endpoint(missing_ca);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("missing.crt"), std::string::npos) << r.error().message;
}

// An in-process server (plain, TLS or on a Unix socket) that answers /healthz and echoes the
// Authorization header at /auth.
class FakeDaemon {
 public:
  explicit FakeDaemon(std::unique_ptr<httplib::Server> http, const std::string& unix_path = "")
      : http_(std::move(http)) {
    http_->Get("/healthz", [](const httplib::Request&, httplib::Response& res) {
      res.set_content(R"({"status":"ok","version":"v1"})", "application/json");
    });
    http_->Get("/auth", [](const httplib::Request& req, httplib::Response& res) {
      res.set_content(req.get_header_value("Authorization"), "text/plain");
    });
    if (unix_path.empty()) {
      port_ = http_->bind_to_any_port("127.0.0.1");
    } else {
      http_->set_address_family(AF_UNIX);
      http_->bind_to_port(unix_path, 1);
    }
    thread_ = std::thread([this] { http_->listen_after_bind(); });
    while (!http_->is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  ~FakeDaemon() {
    http_->stop();
    thread_.join();
  }
  int port() const { return port_; }

 private:
  std::unique_ptr<httplib::Server> http_;
  std::thread thread_;
  int port_ = 0;
};

std::unique_ptr<httplib::Server> tls_server(const server::TlsMaterial& m) {
  auto s = server::make_tls_server(m);
  EXPECT_TRUE(s) << s.error().message;
  return std::move(*s);
}

Endpoint https_endpoint(int port, const std::string& ca) {
  return Endpoint{Endpoint::Kind::kHttps, "https://127.0.0.1:" + std::to_string(port), ca};
}

TEST(ApiClient, TalksOnlyToAServerWhoseCertificateVerifies) {
  TempDir dir;
  auto mine = server::generate_self_signed();
  auto theirs = server::generate_self_signed();
  ASSERT_TRUE(mine && theirs);
  std::ofstream(dir.path() + "/gpud.crt") << mine->cert_pem;
  FakeDaemon daemon(tls_server(*mine));
  FakeDaemon impostor(tls_server(*theirs));

  auto ok = ApiClient(https_endpoint(daemon.port(), dir.path() + "/gpud.crt"), "").get("/healthz");
  ASSERT_TRUE(ok) << ok.error().message;
  EXPECT_EQ(ok->status, 200);

  auto wrong = ApiClient(https_endpoint(impostor.port(), dir.path() + "/gpud.crt"), "").get("/");
  ASSERT_FALSE(wrong);
  EXPECT_EQ(wrong.error().code, kUntrusted);
  EXPECT_NE(wrong.error().message.find("not a gpud this CLI trusts"), std::string::npos)
      << wrong.error().message;
  // Without a pinned certificate the system's CAs decide, and they do not know a self-signed one.
  auto unpinned = ApiClient(https_endpoint(daemon.port(), ""), "").get("/healthz");
  ASSERT_FALSE(unpinned);
  EXPECT_EQ(unpinned.error().code, kUntrusted);
}

TEST(ApiClient, NeverFallsBackToPlainHttp) {
  FakeDaemon plain(std::make_unique<httplib::Server>());
  auto r = ApiClient(https_endpoint(plain.port(), ""), "").get("/healthz");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, kUntrusted);
  EXPECT_NE(r.error().message.find("--server http://"), std::string::npos) << r.error().message;
  // Asked for explicitly, plain HTTP works.
  Endpoint http{Endpoint::Kind::kHttp, "http://127.0.0.1:" + std::to_string(plain.port()), ""};
  auto ok = ApiClient(http, "").get("/healthz");
  ASSERT_TRUE(ok) << ok.error().message;
  EXPECT_EQ(ok->status, 200);
}

// What a verb prints for each outcome of its request.
TEST(ApiClient, AnsweredNamesTheVerbTheStatusAndTheDaemonsMessage) {
  auto none = answered(make_error("connection refused at https://localhost:15132", kNoDaemon), "x");
  ASSERT_FALSE(none);
  EXPECT_EQ(none.error().message,
            "gpud is not running: connection refused at https://localhost:15132");
  EXPECT_EQ(none.error().code, kNoDaemon);
  auto other = answered(make_error("certificate verify failed", kUntrusted), "x");
  ASSERT_FALSE(other);
  EXPECT_EQ(other.error().message, "certificate verify failed");
  auto refused = answered(ApiResponse{403, R"({"code":403,"message":"admin token required"})"},
                          "set-healthy", {200, 400, 404});
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().message, "set-healthy refused (HTTP 403): admin token required");
  auto partial = answered(ApiResponse{404, "{}"}, "set-healthy", {200, 400, 404});
  ASSERT_TRUE(partial);
  EXPECT_EQ(partial->status, 404);
  EXPECT_FALSE(answered(ApiResponse{404, "{}"}, "trigger-check"));
}

TEST(ApiClient, NothingListeningMeansNoDaemon) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  int port = ntohs(addr.sin_port);
  ::close(fd);
  auto r = ApiClient(https_endpoint(port, ""), "").get("/healthz");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, kNoDaemon) << r.error().message;
  auto socket = ApiClient(Endpoint{Endpoint::Kind::kUnixSocket, "/nonexistent/gpud.sock", ""}, "")
                    .get("/healthz");
  ASSERT_FALSE(socket);
  EXPECT_EQ(socket.error().code, kNoDaemon) << socket.error().message;
}

TEST(ApiClient, UsesTheUnixSocketAndSendsTheToken) {
  TempDir dir;
  const std::string path = dir.path() + "/gpud.sock";
  FakeDaemon daemon(std::make_unique<httplib::Server>(), path);
  ApiClient client(Endpoint{Endpoint::Kind::kUnixSocket, path, ""}, "0123456789abcdef");
  auto r = client.get("/auth");
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->body, "Bearer 0123456789abcdef");
}

TEST(ApiClient, AsksATriggerAgainWhileItsChecksStillRun) {
  auto http = std::make_unique<httplib::Server>();
  std::atomic<int> asked{0};
  http->Get("/v1/components/trigger-check", [&](const httplib::Request&, httplib::Response& res) {
    res.status = ++asked < 3 ? 202 : 200;
    res.set_content(std::to_string(asked.load()), "text/plain");
  });
  FakeDaemon daemon(std::move(http));
  Endpoint plain{Endpoint::Kind::kHttp, "http://127.0.0.1:" + std::to_string(daemon.port()), ""};
  auto r = ApiClient(plain, "").get_when_finished("/v1/components/trigger-check",
                                                  std::chrono::milliseconds(10));
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, "3");
  EXPECT_EQ(asked, 3);
}

}  // namespace
}  // namespace gpud::app
