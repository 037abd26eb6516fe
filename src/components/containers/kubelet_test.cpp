// The kubelet component against local HTTP and HTTPS servers serving a recorded-format /pods
// document (testing/fixtures/kubelet/pods.json): no kubelet runs here.
#include "components/containers/kubelet.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "runtimes/attribution.h"
#include "server/tls.h"

namespace gpud::components {
namespace {

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

std::unique_ptr<httplib::Server> https_server() {
  auto material = server::generate_self_signed();
  EXPECT_TRUE(material);
  auto s = server::make_tls_server(*material);
  EXPECT_TRUE(s);
  return std::move(*s);
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

nlohmann::json data_of(const CheckResult& r) {
  return nlohmann::json::parse(r.states.at(0).extra_info.at("data"));
}

TEST(KubeletPodList, FixtureParsesPodsPhasesAndRestarts) {
  auto pods = parse_pod_list(fixture());
  ASSERT_TRUE(pods) << pods.error().message;
  ASSERT_EQ(pods->size(), 4U);
  const KubeletPod& train = (*pods)[0];
  EXPECT_EQ(train.name, "llm-train-0");
  EXPECT_EQ(train.pod_namespace, "ml");
  EXPECT_EQ(train.uid, "0d8a4c1e-7b2f-4c3d-9e8f-1a2b3c4d5e6f");
  EXPECT_EQ(train.phase, "Running");
  ASSERT_EQ(train.containers.size(), 3U);  // the init container first
  EXPECT_TRUE(train.containers[0].init);
  EXPECT_EQ(train.containers[0].state, "terminated");
  EXPECT_EQ(train.containers[0].reason, "Completed");
  const KubeletContainer& trainer = train.containers[2];
  EXPECT_EQ(trainer.name, "trainer");
  EXPECT_EQ(trainer.id, "4f1d2c3b4a5968778695a4b3c2d1e0f00112233445566778899aabbccddeeff0");
  EXPECT_EQ(trainer.runtime, "containerd");
  EXPECT_EQ(trainer.restart_count, 2);
  EXPECT_EQ(trainer.state, "running");
  EXPECT_TRUE(trainer.ready);
  EXPECT_EQ((*pods)[2].containers[0].reason, "CrashLoopBackOff");
  EXPECT_EQ((*pods)[2].containers[0].restart_count, 7);
  EXPECT_EQ((*pods)[3].phase, "Pending");
  EXPECT_EQ((*pods)[3].containers[0].id, "");  // not created yet
  // The directory gets every container with an id (the pending one has none).
  auto listed = kubelet_containers(*pods);
  EXPECT_EQ(listed.size(), 5U);
  EXPECT_EQ(listed[2].id, trainer.id);
  EXPECT_EQ(listed[2].pod_name, "llm-train-0");
  EXPECT_EQ(listed[2].pod_uid, "0d8a4c1e-7b2f-4c3d-9e8f-1a2b3c4d5e6f");
  EXPECT_EQ(listed[2].source, "kubelet");
}

TEST(KubeletPodList, GarbledDocumentsAreErrorsNamingWhy) {
  EXPECT_NE(
      parse_pod_list("{\"kind\":\"PodList\",\"items\":[{\"metad").error().message.find("not JSON"),
      std::string::npos);
  EXPECT_NE(parse_pod_list("[1,2]").error().message.find("not an object"), std::string::npos);
  EXPECT_NE(parse_pod_list("{\"kind\":\"Status\"}").error().message.find("no items"),
            std::string::npos);
  EXPECT_FALSE(parse_pod_list("{\"items\":{}}"));
  EXPECT_FALSE(parse_pod_list("{\"items\":[42]}"));
  EXPECT_NE(parse_pod_list("{\"items\":[{\"metadata\":{\"name\":7}}]}")
                .error()
                .message.find("without a name"),
            std::string::npos);
  // Odd types inside a pod are skipped, not thrown on.
  auto odd = parse_pod_list(
      "{\"items\":[{\"metadata\":{\"name\":\"p\"},\"status\":{\"phase\":3,\"containerStatuses\":"
      "[{\"name\":\"c\",\"restartCount\":\"x\",\"ready\":\"yes\",\"state\":[]},7]}}]}");
  ASSERT_TRUE(odd);
  ASSERT_EQ(odd->at(0).containers.size(), 1U);
  EXPECT_EQ(odd->at(0).containers[0].restart_count, 0);
  EXPECT_EQ(odd->at(0).phase, "");
  auto empty = parse_pod_list("{\"kind\":\"PodList\",\"apiVersion\":\"v1\",\"items\":null}");
  ASSERT_TRUE(empty);
  EXPECT_TRUE(empty->empty());
}

TEST(Kubelet, ReadOnlyPortListsPodsAndPublishesContainers) {
  FakeKubelet ro(std::make_unique<httplib::Server>());
  Config config;
  config.kubelet_read_only_port = ro.port();
  config.kubelet_port = closed_port();
  runtimes::ContainerDirectory dir;
  ComponentContext ctx{&config, nullptr, nullptr, false};
  ctx.containers = &dir;
  KubeletComponent c(ctx);
  CheckResult r = c.check();
  EXPECT_EQ(r.health(), Health::kHealthy) << r.summary();
  EXPECT_NE(r.summary().find("4 pods (3 running, 9 container restarts) from http://127.0.0.1:"),
            std::string::npos)
      << r.summary();
  auto data = data_of(r);
  EXPECT_EQ(data["pods"].size(), 4U);
  EXPECT_EQ(data["pods"][0]["containers"][2]["restart_count"], 2);
  EXPECT_EQ(data["pods"][2]["containers"][0]["reason"], "CrashLoopBackOff");
  // What the attribution of a GPU process of the trainer container finds.
  auto a = runtimes::attribute(
      {"4f1d2c3b4a5968778695a4b3c2d1e0f00112233445566778899aabbccddeeff0", "", "containerd"}, &dir);
  EXPECT_EQ(a.pod, "llm-train-0");
  EXPECT_EQ(a.pod_namespace, "ml");
  EXPECT_EQ(a.container, "trainer");
  EXPECT_EQ(a.source, "kubelet");
}

TEST(Kubelet, AuthenticatedPortWithTheTokenWhenTheReadOnlyPortIsOff) {
  FakeKubelet auth(https_server(), kToken);
  char tmpl[] = "/tmp/gpud-kubelet-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string token_file = std::string(tmpl) + "/token";
  std::ofstream(token_file) << kToken << "\n";
  Config config;
  config.kubelet_read_only_port = closed_port();
  config.kubelet_port = auth.port();
  config.kubelet_token_file = token_file;
  ComponentContext ctx{&config, nullptr, nullptr, false};
  KubeletComponent c(ctx);
  EXPECT_TRUE(c.supported());  // a token file was given
  CheckResult r = c.check();
  EXPECT_EQ(r.health(), Health::kHealthy) << r.summary();
  auto data = data_of(r);
  EXPECT_EQ(data["endpoint"], "https://127.0.0.1:" + std::to_string(auth.port()));
  EXPECT_EQ(data["pods"].size(), 4U);
  ASSERT_EQ(data["errors"].size(), 1U);  // the read-only port was tried first
  EXPECT_NE(data["errors"][0].get<std::string>().find("not listening"), std::string::npos);

  // A wrong token: the kubelet answers 401, which is Degraded.
  std::ofstream(token_file) << "wrong";
  r = c.check();
  EXPECT_EQ(r.health(), Health::kDegraded);
  EXPECT_NE(r.summary().find("answered HTTP 401"), std::string::npos) << r.summary();
  // No token file to read: said so.
  std::filesystem::remove_all(tmpl);
  r = c.check();
  EXPECT_EQ(r.health(), Health::kDegraded);
  EXPECT_NE(r.summary().find("cannot read --kubelet-token-file"), std::string::npos) << r.summary();
}

TEST(Kubelet, NoAnswerIsDegraded) {
  Config config;
  config.kubelet_read_only_port = closed_port();
  config.kubelet_port = closed_port();
  runtimes::ContainerDirectory dir;
  dir.publish("kubelet", {{std::string(64, 'a'), "c", "p", "ns", "", "kubelet"}});
  ComponentContext ctx{&config, nullptr, nullptr, false};
  ctx.containers = &dir;
  CheckResult r = KubeletComponent(ctx).check();
  EXPECT_EQ(r.health(), Health::kDegraded);
  EXPECT_NE(r.summary().find("kubelet does not answer: http://127.0.0.1:"), std::string::npos)
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
  auto data = nlohmann::json::parse(r.states[0].extra_info.at("data"));
  ASSERT_EQ(data["gpu_allocations"].size(), 1u);  // only the nvidia.com resources
  EXPECT_EQ(data["gpu_allocations"][0]["device_ids"], nlohmann::json({"GPU-a", "GPU-b"}));
  auto holders = nvidia_device_holders({pod});
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
