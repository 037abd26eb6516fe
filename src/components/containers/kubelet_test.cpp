// The kubelet component against local HTTP and HTTPS servers serving a recorded-format /pods
// document (testing/fixtures/kubelet/pods.json): no kubelet runs here. The kubelet is trusted only
// as root, which this machine's tests run as; impostors run as uid 65534 in a forked child.
#include "components/containers/kubelet.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "runtimes/attribution.h"
#include "runtimes/container_source.h"
#include "server/tls.h"
#include "testing/raw_http_server.h"

namespace gpud::components {
namespace {

using testing::chunked_answer;
using testing::ImpostorServer;
using testing::pod_list_of_size;
using testing::RawServer;

constexpr const char* kToken = "eyJhbGciOiJSUzI1NiJ9.test-token";

std::string fixture() {
  std::ifstream in(std::string(GPUD_SOURCE_DIR) + "/testing/fixtures/kubelet/pods.json");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A kubelet stand-in: GET /pods answers `body` (after `delay`), or 401 without the bearer token
// when `token` is set.
class FakeKubelet {
 public:
  explicit FakeKubelet(std::unique_ptr<httplib::Server> server, std::string token = "")
      : server_(std::move(server)), token_(std::move(token)) {
    server_->Get("/pods", [this](const httplib::Request& req, httplib::Response& res) {
      requests_.fetch_add(1);
      if (!token_.empty() && req.get_header_value("Authorization") != "Bearer " + token_) {
        res.status = 401;
        res.set_content("Unauthorized", "text/plain");
        return;
      }
      std::this_thread::sleep_for(delay_);
      res.set_content(body_, "application/json");
    });
    port_ = server_->bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_->listen_after_bind(); });
    for (int i = 0; i < 500 && !server_->is_running(); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ~FakeKubelet() {
    server_->stop();
    thread_.join();
  }
  int port() const { return port_; }
  int requests() const { return requests_.load(); }
  std::string body_ = fixture();
  std::chrono::milliseconds delay_{0};

 private:
  std::unique_ptr<httplib::Server> server_;
  std::string token_;
  int port_ = 0;
  std::thread thread_;
  std::atomic<int> requests_{0};
};

server::TlsMaterial tls_material() {
  auto material = server::generate_self_signed();
  EXPECT_TRUE(material);
  return *material;
}

std::unique_ptr<httplib::Server> https_server(const server::TlsMaterial& material) {
  auto s = server::make_tls_server(material);
  EXPECT_TRUE(s);
  return std::move(*s);
}

// A private directory, removed with its contents.
class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/gpud-kubelet-XXXXXX";
    EXPECT_NE(mkdtemp(tmpl), nullptr);
    path_ = tmpl;
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  const std::string& path() const { return path_; }
  std::string write(const std::string& name, const std::string& text) const {
    const std::string file = path_ + "/" + name;
    std::ofstream(file) << text;
    return file;
  }

 private:
  std::string path_;
};

// The kubelet is believed only when its socket is root's: the tests that serve it from this
// process need to run as root.
#define REQUIRE_ROOT() \
  if (geteuid() != 0) GTEST_SKIP() << "the kubelet is trusted only as root; run the tests as root"

// The process's resident and peak resident memory (VmRSS, VmHWM) in bytes.
std::pair<size_t, size_t> resident_bytes() {
  std::ifstream in("/proc/self/status");
  std::string line;
  size_t rss = 0, hwm = 0;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) rss = std::stoull(line.substr(6)) << 10;
    if (line.rfind("VmHWM:", 0) == 0) hwm = std::stoull(line.substr(6)) << 10;
  }
  return {rss, hwm};
}

// A port nothing listens on: bound, then closed.
int closed_port() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  EXPECT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  close(fd);
  return ntohs(addr.sin_port);
}

nlohmann::json data_of(const CheckResult& r) { return r.states.at(0).data; }

TEST(Kubelet, ReadOnlyPortListsPodsAndPublishesContainers) {
  REQUIRE_ROOT();
  FakeKubelet ro(std::make_unique<httplib::Server>());
  Config config;
  config.kubelet_read_only_port = ro.port();
  config.kubelet_port = closed_port();
  runtimes::ContainerDirectory dir;
  runtimes::ContainerSource source(dir);
  ComponentContext ctx{&config, nullptr, nullptr, false};
  ctx.containers = &dir;
  ctx.container_source = &source;
  KubeletComponent c(ctx);
  CheckResult r = c.check();
  EXPECT_EQ(r.health(), Health::kHealthy) << r.summary();
  EXPECT_NE(r.summary().find("4 pods (3 running, 9 container restarts) from http://127.0.0.1:"),
            std::string::npos)
      << r.summary();
  // The states carry a summary, not the pods.
  auto data = data_of(r);
  EXPECT_EQ(data["pods"], 4);
  EXPECT_EQ(data["pods_by_phase"], nlohmann::json({{"Running", 3}, {"Pending", 1}}));
  EXPECT_EQ(data["containers"], 6);
  EXPECT_EQ(data["container_restarts"], 9);
  EXPECT_EQ(data["containers_waiting_by_reason"]["CrashLoopBackOff"], 1);
  EXPECT_EQ(r.states[0].data.dump().find("llm-train-0"), std::string::npos) << data.dump();
  // What the attribution of a GPU process of the trainer container finds.
  auto a = runtimes::attribute(
      {"4f1d2c3b4a5968778695a4b3c2d1e0f00112233445566778899aabbccddeeff0", "", "containerd"}, &dir);
  EXPECT_EQ(a.pod, "llm-train-0");
  EXPECT_EQ(a.pod_namespace, "ml");
  EXPECT_EQ(a.container, "trainer");
  EXPECT_EQ(a.source, "kubelet");
}

TEST(Kubelet, ReadOnlyPortIsNotAskedByDefault) {
  Config config;
  config.kubelet_port = closed_port();
  ComponentContext ctx{&config, nullptr, nullptr, false};
  CheckResult r = KubeletComponent(ctx).check();
  EXPECT_EQ(r.health(), Health::kDegraded);
  EXPECT_EQ(r.summary().find("http://"), std::string::npos) << r.summary();
  EXPECT_NE(r.summary().find("https://127.0.0.1:"), std::string::npos) << r.summary();
}

TEST(Kubelet, AuthenticatedPortWithTheTokenWhenTheCertificateVerifies) {
  REQUIRE_ROOT();
  const server::TlsMaterial material = tls_material();
  FakeKubelet auth(https_server(material), kToken);
  TempDir tmp;
  const std::string token_file = tmp.write("token", std::string(kToken) + "\n");
  Config config;
  config.host_root = tmp.path();
  config.kubelet_read_only_port = closed_port();
  config.kubelet_port = auth.port();
  config.kubelet_token_file = token_file;
  config.kubelet_ca_file = tmp.write("kubelet.crt", material.cert_pem);
  ComponentContext ctx{&config, nullptr, nullptr, false};
  KubeletComponent c(ctx);
  EXPECT_TRUE(c.supported());  // a token file was given
  CheckResult r = c.check();
  EXPECT_EQ(r.health(), Health::kHealthy) << r.summary();
  auto data = data_of(r);
  EXPECT_EQ(data["endpoint"], "https://127.0.0.1:" + std::to_string(auth.port()));
  EXPECT_EQ(data["pods"], 4);
  ASSERT_EQ(data["errors"].size(), 1U);  // the read-only port was tried first
  EXPECT_NE(data["errors"][0].get<std::string>().find("not listening"), std::string::npos);

  // A wrong token: the kubelet answers 401, which is Degraded.
  std::ofstream(token_file) << "wrong";
  r = c.check();
  EXPECT_EQ(r.health(), Health::kDegraded);
  EXPECT_NE(r.summary().find("answered HTTP 401"), std::string::npos) << r.summary();
  // No token file to read: said so.
  std::filesystem::remove(token_file);
  r = c.check();
  EXPECT_EQ(r.health(), Health::kDegraded);
  EXPECT_NE(r.summary().find("cannot read --kubelet-token-file"), std::string::npos) << r.summary();

  // Without --kubelet-ca-file, the kubelet's own certificate under the host root verifies it.
  std::ofstream(token_file) << kToken;
  config.kubelet_ca_file.clear();
  std::filesystem::create_directories(tmp.path() + "/var/lib/kubelet/pki");
  tmp.write("var/lib/kubelet/pki/kubelet.crt", material.cert_pem);
  r = c.check();
  EXPECT_EQ(r.health(), Health::kHealthy) << r.summary();
}

TEST(Kubelet, CertificateThatDoesNotVerifyNeverReceivesTheToken) {
  REQUIRE_ROOT();
  FakeKubelet impostor(https_server(tls_material()), kToken);
  TempDir tmp;
  Config config;
  config.host_root = tmp.path();  // no CA there
  config.kubelet_port = impostor.port();
  config.kubelet_token_file = tmp.write("token", kToken);
  config.kubelet_ca_file = tmp.write("ca.crt", tls_material().cert_pem);  // another certificate
  ComponentContext ctx{&config, nullptr, nullptr, false};
  KubeletComponent c(ctx);
  CheckResult r = c.check();
  EXPECT_EQ(r.health(), Health::kDegraded);
  EXPECT_NE(r.summary().find("not trusted: its certificate does not verify against " +
                             config.kubelet_ca_file),
            std::string::npos)
      << r.summary();
  EXPECT_NE(r.summary().find("the token is not sent"), std::string::npos) << r.summary();
  EXPECT_EQ(impostor.requests(), 0);

  // No CA at all (no flag, none under the host root): nothing is sent either.
  config.kubelet_ca_file.clear();
  r = c.check();
  EXPECT_EQ(r.health(), Health::kDegraded);
  EXPECT_NE(r.summary().find("no CA to verify its serving certificate"), std::string::npos)
      << r.summary();
  EXPECT_EQ(impostor.requests(), 0);
}

TEST(Kubelet, ImpostorServingAsNobodyIsNotTrusted) {
  REQUIRE_ROOT();
  const std::string answer = chunked_answer(fixture());
  ImpostorServer impostor({answer});
  ASSERT_GT(impostor.port(), 0);
  Config config;
  config.kubelet_read_only_port = impostor.port();
  config.kubelet_port = 0;
  runtimes::ContainerDirectory dir;
  runtimes::ContainerSource source(dir);
  ComponentContext ctx{&config, nullptr, nullptr, false};
  ctx.containers = &dir;
  ctx.container_source = &source;
  CheckResult r = KubeletComponent(ctx).check();
  EXPECT_EQ(r.health(), Health::kDegraded);
  EXPECT_NE(r.summary().find(
                "no pods from the kubelet: http://127.0.0.1:" + std::to_string(impostor.port()) +
                ": not trusted: the socket serving it belongs to uid 65534, not root"),
            std::string::npos)
      << r.summary();
  EXPECT_TRUE(dir.all().empty());  // its pods feed no attribution
  EXPECT_EQ(data_of(r).count("pods"), 0U);
  EXPECT_EQ(impostor.received(), "");  // not even the request

  // On the authenticated port, with a token and a CA that would verify anything it served: the
  // token is never sent.
  TempDir tmp;
  config.kubelet_read_only_port = 0;
  config.kubelet_port = impostor.port();
  config.kubelet_token_file = tmp.write("token", kToken);
  config.kubelet_ca_file = tmp.write("ca.crt", tls_material().cert_pem);
  r = KubeletComponent(ctx).check();
  EXPECT_EQ(r.health(), Health::kDegraded);
  EXPECT_NE(r.summary().find("https://127.0.0.1:" + std::to_string(impostor.port()) +
                             ": not trusted: the socket serving it belongs to uid 65534"),
            std::string::npos)
      << r.summary();
  EXPECT_EQ(impostor.received(), "");
}

TEST(Kubelet, PodListOverTheCapIsRefusedWithMemoryBounded) {
  REQUIRE_ROOT();
  const std::string body = pod_list_of_size(31'000'000);
  const std::string answer = chunked_answer(body);
  RawServer kubelet({answer});
  KubeletEndpoint e;
  e.port = kubelet.port();
  // The peak resident memory from here on (writing 5 to clear_refs resets VmHWM to VmRSS).
  ASSERT_TRUE(static_cast<bool>(std::ofstream("/proc/self/clear_refs") << "5"));
  const auto [rss_before, hwm_reset] = resident_bytes();
  auto r = list_kubelet_pods(e);
  const size_t peak_growth = resident_bytes().second - rss_before;
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("/pods is larger than 8 MiB"), std::string::npos)
      << r.error().message;
#if !defined(GPUD_SANITIZED)  // the sanitizers' shadow memory and quarantine are not gpud's
  EXPECT_LT(peak_growth, size_t{24} << 20) << "peak RSS grew by " << (peak_growth >> 20) << " MiB";
#endif
  EXPECT_LT(kubelet.sent(), size_t{20} << 20);  // the rest was never read
  std::cout << "31 MB pod list: peak RSS growth " << (peak_growth >> 10) << " KiB, "
            << (kubelet.sent() >> 10) << " KiB sent before the refusal\n";

  // A Content-Length over the cap is refused before the body is read.
  const std::string sized =
      "HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
  RawServer sized_kubelet({sized});
  e.port = sized_kubelet.port();
  r = list_kubelet_pods(e);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("/pods is larger than 8 MiB"), std::string::npos)
      << r.error().message;
}

TEST(Kubelet, TricklingAnswerTimesOutWithinTheDeadline) {
  REQUIRE_ROOT();
  // The head a byte every 200 ms: each read gets something, the whole never comes.
  const std::string answer = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n" +
                             std::string(200, 'X') + "\r\n\r\n{}";
  RawServer trickle({answer, 1, std::chrono::milliseconds(200)});
  KubeletEndpoint e;
  e.port = trickle.port();
  const auto start = std::chrono::steady_clock::now();
  auto r = list_kubelet_pods(e, std::chrono::milliseconds(1000));
  const auto took = std::chrono::steady_clock::now() - start;
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("no answer within 1000 ms"), std::string::npos)
      << r.error().message;
  EXPECT_LT(took, std::chrono::milliseconds(1500));

  // A body that trickles is cut by the same deadline.
  const std::string body_answer =
      "HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n" + std::string(1000, ' ');
  RawServer slow_body({body_answer, 1, std::chrono::milliseconds(200)});
  e.port = slow_body.port();
  const auto body_start = std::chrono::steady_clock::now();
  r = list_kubelet_pods(e, std::chrono::milliseconds(1000));
  ASSERT_FALSE(r);
  EXPECT_LT(std::chrono::steady_clock::now() - body_start, std::chrono::milliseconds(1500));
}

TEST(Kubelet, NoAnswerIsDegraded) {
  Config config;
  config.kubelet_read_only_port = closed_port();
  config.kubelet_port = closed_port();
  runtimes::ContainerDirectory dir;
  dir.publish("kubelet", {{std::string(64, 'a'), "c", "p", "ns", "", "kubelet"}});
  runtimes::ContainerSource source(dir);
  ComponentContext ctx{&config, nullptr, nullptr, false};
  ctx.containers = &dir;
  ctx.container_source = &source;
  CheckResult r = KubeletComponent(ctx).check();
  EXPECT_EQ(r.health(), Health::kDegraded);
  EXPECT_NE(r.summary().find("no pods from the kubelet: http://127.0.0.1:"), std::string::npos)
      << r.summary();
  EXPECT_NE(r.states[0].error.find("https://127.0.0.1:"), std::string::npos);
  // The last listing stays (it ages out in the directory), so a brief kubelet restart does not
  // lose the attribution of running containers.
  EXPECT_EQ(dir.all().size(), 1U);

  // Both ports off: nothing to ask, not applicable.
  config.kubelet_read_only_port = 0;
  config.kubelet_port = 0;
  r = KubeletComponent(ctx).check();
  EXPECT_EQ(r.health(), Health::kHealthy);
  EXPECT_NE(r.summary().find("not applicable"), std::string::npos);
}

TEST(Kubelet, GarbledDocumentIsDegradedNamingTheEndpoint) {
  REQUIRE_ROOT();
  FakeKubelet ro(std::make_unique<httplib::Server>());
  ro.body_ = "<html>502 Bad Gateway</html>";
  Config config;
  config.kubelet_read_only_port = ro.port();
  config.kubelet_port = 0;
  ComponentContext ctx{&config, nullptr, nullptr, false};
  CheckResult r = KubeletComponent(ctx).check();
  EXPECT_EQ(r.health(), Health::kDegraded);
  EXPECT_NE(r.summary().find("http://127.0.0.1:" + std::to_string(ro.port()) +
                             ": the kubelet's /pods is not JSON"),
            std::string::npos)
      << r.summary();
}

TEST(Kubelet, SlowKubeletTimesOut) {
  REQUIRE_ROOT();
  FakeKubelet ro(std::make_unique<httplib::Server>());
  ro.delay_ = std::chrono::milliseconds(2000);
  KubeletEndpoint e;
  e.port = ro.port();
  const auto start = std::chrono::steady_clock::now();
  auto r = list_kubelet_pods(e, std::chrono::milliseconds(300));
  const auto took = std::chrono::steady_clock::now() - start;
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("no answer within 300 ms"), std::string::npos)
      << r.error().message;
  EXPECT_LT(took, std::chrono::milliseconds(1500));
  EXPECT_EQ(ro.requests(), 1);
}

TEST(Kubelet, SupportedWhereAKubeletIsInstalled) {
  char tmpl[] = "/tmp/gpud-kubelet-root-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  Config config;
  config.host_root = tmpl;
  config.executable_search_path = tmpl;  // no kubelet executable there
  ComponentContext ctx{&config, nullptr, nullptr, false};
  EXPECT_FALSE(KubeletComponent(ctx).supported());
  std::filesystem::create_directories(std::string(tmpl) + "/var/lib/kubelet");
  EXPECT_TRUE(KubeletComponent(ctx).supported());
  std::filesystem::remove_all(tmpl);
}

TEST(KubeletRule, PodResourcesAllocationsInTheDataAndAFailingSocketIsDegraded) {
  KubeletSnapshot s;
  KubeletEndpoint ro;
  ro.port = 10255;
  s.attempts.push_back({ro.describe(), std::vector<KubeletPod>{}});
  runtimes::PodResources pod;
  pod.name = "trainer-0";
  pod.pod_namespace = "ml";
  pod.containers.push_back(
      {"main", {{"nvidia.com/gpu", {"GPU-a", "GPU-b"}}, {"example.com/nic", {"nic0"}}}});
  s.pod_resources = std::vector<runtimes::PodResources>{pod};
  CheckResult r = evaluate_kubelet(s);
  EXPECT_EQ(r.health(), Health::kHealthy);
  auto data = r.states[0].data;
  ASSERT_EQ(data["gpu_allocations"].size(), 1u);  // only the nvidia.com resources
  EXPECT_EQ(data["gpu_allocations"][0]["device_ids"], nlohmann::json({"GPU-a", "GPU-b"}));
  auto holders = runtimes::nvidia_device_holders({pod});
  ASSERT_EQ(holders.size(), 2u);
  EXPECT_EQ(holders[1].device_id, "GPU-b");
  EXPECT_EQ(holders[1].container, "main");

  s.pod_resources = Result<std::vector<runtimes::PodResources>>(make_error("connect refused"));
  r = evaluate_kubelet(s);
  EXPECT_EQ(r.health(), Health::kDegraded);
  EXPECT_EQ(r.states[0].reason, "kubelet pod-resources: connect refused");
}

}  // namespace
}  // namespace gpud::components
