// The node-condition sink: the pure judgement of the conditions, and the sink against an
// in-process stand-in for the API server's node and event paths (no kube-apiserver here; the e2e
// test tests/e2e/kubernetes_node_conditions_e2e_test.cpp adds schema checks and kubectl).
#include "sinks/kubernetes_node_conditions.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <thread>

#include "core/time_util.h"
#include "server/tls.h"
#include "testing/health_state.h"
#include "testing/log_capture.h"

namespace gpud::sinks {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;
using SteadyClock = std::chrono::steady_clock;

using testing_support::health_state;

components::GpuHealth gpu(unsigned int index, std::string bus, std::string uuid) {
  components::GpuHealth g;
  g.index = index;
  g.pci_bus_id = std::move(bus);
  g.uuid = std::move(uuid);
  return g;
}

const NodeCondition* find(const std::vector<NodeCondition>& cs, const std::string& type) {
  for (const auto& c : cs)
    if (c.type == type) return &c;
  return nullptr;
}

NodeHealthInputs healthy_node() {
  NodeHealthInputs in;
  in.gpus = {gpu(0, "00000000:18:00.0", "GPU-aa"), gpu(1, "00000000:2A:00.0", "GPU-bb")};
  in.states = {health_state("accelerator-nvidia-ecc", Health::kHealthy),
               health_state("accelerator-nvidia-info", Health::kHealthy),
               health_state("cpu", Health::kHealthy), health_state("containerd", Health::kHealthy)};
  return in;
}

// GPU 1's ECC fault as gpu_health reports it, and the component's state.
NodeHealthInputs ecc_fault_on_gpu1() {
  NodeHealthInputs in = healthy_node();
  in.states[0] = health_state("accelerator-nvidia-ecc", Health::kUnhealthy, "GPU 1 volatile DBE");
  in.gpus[1].health = Health::kUnhealthy;
  in.gpus[1].causes.push_back({"accelerator-nvidia-ecc", Health::kUnhealthy,
                               "GPU 1 (0000:2a:00.0) uncorrectable ECC errors",
                               RepairAction::kRebootSystem});
  return in;
}

TEST(NodeConditionsJudge, HealthyNodeHasEveryConditionFalse) {
  auto cs = judge_conditions(healthy_node());
  ASSERT_EQ(cs.size(), 3U);
  for (const auto& c : cs) {
    EXPECT_FALSE(c.problem) << c.type;
    EXPECT_THAT(c.message, HasSubstr("no Unhealthy component"));
  }
  EXPECT_EQ(find(cs, "GpudGPUProblem")->reason, "GPUsHealthy");
  EXPECT_EQ(find(cs, "GpudKernelProblem")->reason, "KernelHealthy");
  EXPECT_EQ(find(cs, "GpudRuntimeProblem")->reason, "RuntimeHealthy");
}

TEST(NodeConditionsJudge, AnUnhealthyGpuNamesItsIndexBusIdUuidReasonAndAction) {
  auto cs = judge_conditions(ecc_fault_on_gpu1());
  const NodeCondition* g = find(cs, "GpudGPUProblem");
  ASSERT_NE(g, nullptr);
  EXPECT_TRUE(g->problem);
  EXPECT_EQ(g->reason, "GPUUnhealthy");
  EXPECT_EQ(g->message,
            "GPU 1 (bus 0000:2a:00.0, GPU-bb): accelerator-nvidia-ecc: GPU 1 (0000:2a:00.0) "
            "uncorrectable ECC errors (suggested action REBOOT_SYSTEM)");
  EXPECT_EQ(g->subjects, std::vector<std::string>{"gpu 1 accelerator-nvidia-ecc"});
  EXPECT_FALSE(find(cs, "GpudKernelProblem")->problem);
}

TEST(NodeConditionsJudge, NodeWideFaultsAreNamedByComponentAndDegradedIsNoProblem) {
  NodeHealthInputs in = healthy_node();
  HealthState fm =
      health_state("accelerator-nvidia-fabric-manager", Health::kUnhealthy, "fabric down");
  fm.suggested_actions = SuggestedActions{"", {RepairAction::kHardwareInspection}};
  in.states.push_back(fm);
  in.states.push_back(health_state("memory", Health::kDegraded, "slow"));
  in.states.push_back(health_state("kubelet", Health::kUnhealthy, "kubelet down"));
  auto cs = judge_conditions(in);
  EXPECT_EQ(
      find(cs, "GpudGPUProblem")->message,
      "accelerator-nvidia-fabric-manager: fabric down (suggested action HARDWARE_INSPECTION)");
  EXPECT_FALSE(find(cs, "GpudKernelProblem")->problem);  // Degraded does not stop workloads
  EXPECT_TRUE(find(cs, "GpudRuntimeProblem")->problem);
  EXPECT_EQ(find(cs, "GpudRuntimeProblem")->message, "kubelet: kubelet down");
}

TEST(NodeConditionsJudge, GpudItselfAndCustomPluginsAreNotJudgedAndUnknownIsLeftOut) {
  NodeHealthInputs in;
  in.states = {health_state("gpud", Health::kUnhealthy, "store"),
               health_state("cpu", Health::kInitializing)};
  HealthState plugin = health_state("my-plugin", Health::kUnhealthy);
  plugin.component_type = "custom-plugin";
  in.states.push_back(plugin);
  // Nothing known yet: no condition is written, not even False.
  EXPECT_TRUE(judge_conditions(in).empty());
}

TEST(NodeConditionsJudge, LongMessagesAreBoundedAtACharacterBoundary) {
  NodeHealthInputs in = ecc_fault_on_gpu1();
  in.gpus[1].causes[0].reason = std::string(3000, 'x') + "é";
  for (int i = 0; i < 3; ++i) in.gpus[1].causes.push_back(in.gpus[1].causes[0]);
  const std::vector<NodeCondition> conditions = judge_conditions(in);
  const NodeCondition* g = find(conditions, "GpudGPUProblem");
  ASSERT_NE(g, nullptr);
  EXPECT_LE(g->message.size(), kMaxMessageBytes);
  EXPECT_THAT(g->message, HasSubstr("more bytes)"));
}

TEST(NodeConditionsWire, PatchAndEventHaveTheKubernetesShapes) {
  NodeCondition c{"GpudGPUProblem", true, "GPUUnhealthy", "GPU 1 bad", {}};
  const TimePoint now = from_unix_ms(1'780'000'000'000);
  auto patch = status_patch({c}, {{"GpudGPUProblem", "2026-01-01T00:00:00Z"}}, now);
  const auto& cond = patch["status"]["conditions"][0];
  EXPECT_EQ(cond["status"], "True");
  EXPECT_EQ(cond["lastTransitionTime"], "2026-01-01T00:00:00Z");
  EXPECT_EQ(cond["lastHeartbeatTime"], format_rfc3339(now));
  auto e = transition_event("node-1", "uid-1", "default", c, now);
  EXPECT_EQ(e["involvedObject"],
            nlohmann::json(
                {{"apiVersion", "v1"}, {"kind", "Node"}, {"name", "node-1"}, {"uid", "uid-1"}}));
  EXPECT_EQ(e["type"], "Warning");
  EXPECT_EQ(e["message"], "GpudGPUProblem is True: GPU 1 bad");
  EXPECT_EQ(e["metadata"]["namespace"], "default");
  EXPECT_EQ(e["metadata"]["name"].get<std::string>().rfind("node-1.gpudgpuproblem.", 0), 0U);
  c.problem = false;
  EXPECT_EQ(transition_event("node-1", "", "default", c, now)["type"], "Normal");
}

// A stand-in for the API server's node and event paths. `fail_status` > 0 answers every request
// with it (a Status object); `garbage` answers 200 with HTML; `hang` waits before answering.
class FakeApiServer {
 public:
  explicit FakeApiServer(std::unique_ptr<httplib::Server> server = nullptr)
      : server_(server ? std::move(server) : std::make_unique<httplib::Server>()) {
    node_ = {{"apiVersion", "v1"},
             {"kind", "Node"},
             {"metadata", {{"name", "node-1"}, {"uid", "0b5e-uid"}}},
             {"status", {{"conditions", nlohmann::json::array()}}}};
    auto faulty = [this](const httplib::Request& req, httplib::Response& res) {
      ++requests_;
      if (req.get_header_value("Authorization") != "Bearer secret") {
        res.status = 401;
        res.set_content(R"({"kind":"Status","message":"Unauthorized"})", "application/json");
        return true;
      }
      if (hang_.load() > 0ms) std::this_thread::sleep_for(hang_.load());
      if (garbage_) {
        res.set_content("<html>proxy error</html>", "text/html");
        return true;
      }
      if (fail_status_ > 0) {
        res.status = fail_status_;
        res.set_content(
            nlohmann::json({{"kind", "Status"}, {"message", "injected failure"}}).dump(),
            "application/json");
        return true;
      }
      return false;
    };
    server_->Get("/api/v1/nodes/node-1", [this, faulty](const auto& req, auto& res) {
      if (faulty(req, res)) return;
      std::lock_guard lock(mu_);
      res.set_content(node_.dump(), "application/json");
    });
    server_->Patch("/api/v1/nodes/node-1/status", [this, faulty](const auto& req, auto& res) {
      if (faulty(req, res)) return;
      std::lock_guard lock(mu_);
      content_types_.push_back(req.get_header_value("Content-Type"));
      auto patch = nlohmann::json::parse(req.body);
      for (const auto& c : patch["status"]["conditions"]) {
        auto& list = node_["status"]["conditions"];
        bool merged = false;
        for (auto& have : list)
          if (have["type"] == c["type"]) have = c, merged = true;
        if (!merged) list.push_back(c);
      }
      ++patches_;
      res.set_content(node_.dump(), "application/json");
    });
    server_->Post("/api/v1/namespaces/default/events", [this, faulty](const auto& req, auto& res) {
      if (faulty(req, res)) return;
      std::lock_guard lock(mu_);
      events_.push_back(nlohmann::json::parse(req.body));
      res.status = 201;
      res.set_content(req.body, "application/json");
    });
    port_ = server_->bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_->listen_after_bind(); });
    for (int i = 0; i < 500 && !server_->is_running(); ++i) std::this_thread::sleep_for(10ms);
  }
  ~FakeApiServer() {
    server_->stop();
    thread_.join();
  }
  std::string url(const char* scheme = "http") const {
    return std::string(scheme) + "://127.0.0.1:" + std::to_string(port_);
  }
  nlohmann::json condition(const std::string& type) {
    std::lock_guard lock(mu_);
    for (const auto& c : node_["status"]["conditions"])
      if (c["type"] == type) return c;
    return nullptr;
  }
  std::vector<nlohmann::json> events() {
    std::lock_guard lock(mu_);
    return events_;
  }
  int patches() {
    std::lock_guard lock(mu_);
    return patches_;
  }
  std::vector<std::string> content_types() {
    std::lock_guard lock(mu_);
    return content_types_;
  }

  std::atomic<int> fail_status_{0};
  std::atomic<bool> garbage_{false};
  std::atomic<std::chrono::milliseconds> hang_{0ms};
  std::atomic<int> requests_{0};

 private:
  std::unique_ptr<httplib::Server> server_;
  std::mutex mu_;
  nlohmann::json node_;
  std::vector<nlohmann::json> events_;
  std::vector<std::string> content_types_;
  int patches_ = 0;
  int port_ = 0;
  std::thread thread_;
};

NodeConditionsOptions fast_options() {
  NodeConditionsOptions o;
  o.node_name = "node-1";
  o.poll_interval = 100ms;
  o.min_write_interval = 1s;
  o.resync_interval = 60s;
  o.initial_backoff = 1s;
  o.max_backoff = 8s;
  o.log_interval = 60s;
  return o;
}

std::unique_ptr<KubernetesApi> api_for(const std::string& url, std::string token = "secret",
                                       std::chrono::milliseconds timeout = 2000ms) {
  KubernetesConnection c;
  c.server = url;
  c.token = std::move(token);
  auto api = KubernetesApi::create(c, timeout);
  EXPECT_TRUE(api) << api.error().message;
  return api ? std::move(*api) : nullptr;
}

// The sink driven round by round, with the inputs the test sets.
struct Harness {
  explicit Harness(FakeApiServer& server, NodeConditionsOptions o = fast_options(),
                   std::chrono::milliseconds timeout = 2000ms)
      : sink(api_for(server.url(), "secret", timeout), o, [this] {
          std::lock_guard lock(mu);
          return inputs;
        }) {}
  void set(NodeHealthInputs in) {
    std::lock_guard lock(mu);
    inputs = std::move(in);
  }
  std::mutex mu;
  NodeHealthInputs inputs = healthy_node();
  KubernetesNodeConditions sink;
};

TEST(NodeConditionsSink, FaultSetsTheConditionWithAnEventAndRecoveryClearsIt) {
  FakeApiServer server;
  Harness h(server);
  auto t = SteadyClock::now();
  h.sink.run_once(t);
  EXPECT_EQ(server.condition("GpudGPUProblem")["status"], "False");
  EXPECT_EQ(server.condition("GpudKernelProblem")["status"], "False");
  EXPECT_TRUE(server.events().empty());  // a condition that starts healthy is no transition
  EXPECT_EQ(server.content_types(),
            std::vector<std::string>{"application/strategic-merge-patch+json"});

  h.set(ecc_fault_on_gpu1());
  h.sink.run_once(t += 2s);
  auto c = server.condition("GpudGPUProblem");
  EXPECT_EQ(c["status"], "True");
  EXPECT_EQ(c["reason"], "GPUUnhealthy");
  EXPECT_THAT(c["message"].get<std::string>(),
              HasSubstr("GPU 1 (bus 0000:2a:00.0, GPU-bb): accelerator-nvidia-ecc"));
  EXPECT_THAT(c["message"].get<std::string>(), HasSubstr("REBOOT_SYSTEM"));
  ASSERT_EQ(server.events().size(), 1U);
  auto e = server.events()[0];
  EXPECT_EQ(e["type"], "Warning");
  EXPECT_EQ(e["reason"], "GPUUnhealthy");
  EXPECT_EQ(e["involvedObject"]["uid"], "0b5e-uid");
  EXPECT_EQ(e["involvedObject"]["kind"], "Node");
  const std::string since = c["lastTransitionTime"];

  // Nothing changed: nothing written.
  const int patches = server.patches();
  h.sink.run_once(t += 2s);
  h.sink.run_once(t += 2s);
  EXPECT_EQ(server.patches(), patches);

  h.set(healthy_node());
  h.sink.run_once(t += 2s);
  EXPECT_EQ(server.condition("GpudGPUProblem")["status"], "False");
  EXPECT_EQ(server.condition("GpudGPUProblem")["reason"], "GPUsHealthy");
  ASSERT_EQ(server.events().size(), 2U);
  EXPECT_EQ(server.events()[1]["type"], "Normal");
  EXPECT_EQ(h.sink.status().error, "");
  EXPECT_EQ(h.sink.status().name, "kubernetes-node-conditions");
}

TEST(NodeConditionsSink, WritesAreRateLimitedAndResyncedSlowly) {
  FakeApiServer server;
  NodeConditionsOptions o = fast_options();
  o.min_write_interval = 10s;
  o.resync_interval = 30s;
  Harness h(server, o);
  auto t = SteadyClock::now();
  h.sink.run_once(t);
  EXPECT_EQ(server.patches(), 1);
  h.set(ecc_fault_on_gpu1());
  auto next = h.sink.run_once(t + 1s);  // within the write interval: waits
  EXPECT_EQ(server.patches(), 1);
  EXPECT_LE(next, t + 10s);
  h.sink.run_once(t + 9s);
  EXPECT_EQ(server.patches(), 1);
  h.sink.run_once(t + 10s);
  EXPECT_EQ(server.patches(), 2);
  EXPECT_EQ(server.condition("GpudGPUProblem")["status"], "True");
  h.sink.run_once(t + 25s);
  EXPECT_EQ(server.patches(), 2);
  h.sink.run_once(t + 41s);  // resync
  EXPECT_EQ(server.patches(), 3);
  EXPECT_EQ(server.events().size(), 1U);  // a resync is no transition
}

TEST(NodeConditionsSink, ARestartKeepsTheTransitionTimeAndWritesNoSecondEvent) {
  FakeApiServer server;
  auto t = SteadyClock::now();
  std::string since;
  {
    Harness h(server);
    h.set(ecc_fault_on_gpu1());
    h.sink.run_once(t);
    since = server.condition("GpudGPUProblem")["lastTransitionTime"];
  }
  Harness again(server);
  again.set(ecc_fault_on_gpu1());
  again.sink.run_once(t + 5s);
  EXPECT_EQ(server.condition("GpudGPUProblem")["lastTransitionTime"], since);
  EXPECT_EQ(server.events().size(), 1U);
}

struct BadAnswer {
  const char* name;
  int status;
  bool garbage;
  const char* expected;
};

class NodeConditionsBadAnswer : public ::testing::TestWithParam<BadAnswer> {};

TEST_P(NodeConditionsBadAnswer, IsReportedWithBackoffAndOneLogLineThenRecovers) {
  const BadAnswer& bad = GetParam();
  FakeApiServer server;
  testing::LogCapture log("kubernetes");
  Harness h(server);
  auto t = SteadyClock::now();
  h.sink.run_once(t);
  ASSERT_EQ(h.sink.status().error, "");
  server.fail_status_ = bad.status;
  server.garbage_ = bad.garbage;
  h.set(ecc_fault_on_gpu1());
  auto retry = h.sink.run_once(t += 2s);
  EXPECT_THAT(h.sink.status().error, HasSubstr(bad.expected));
  EXPECT_EQ(retry, t + 1s);  // the first backoff
  const int asked = server.requests_;
  EXPECT_EQ(h.sink.run_once(t + 500ms), retry);  // before the retry: no request
  EXPECT_EQ(server.requests_, asked);
  retry = h.sink.run_once(retry);
  EXPECT_EQ(retry - t, 1s + 2s);  // doubled
  retry = h.sink.run_once(retry);
  EXPECT_EQ(log.count("cannot keep node node-1's conditions"), 1U) << log.text();

  server.fail_status_ = 0;
  server.garbage_ = false;
  h.sink.run_once(retry);
  EXPECT_EQ(h.sink.status().error, "");
  EXPECT_EQ(server.condition("GpudGPUProblem")["status"], "True");
  EXPECT_EQ(server.events().size(), 1U);
  EXPECT_EQ(log.count("conditions are written again"), 1U) << log.text();
}

INSTANTIATE_TEST_SUITE_P(
    Answers, NodeConditionsBadAnswer,
    ::testing::Values(BadAnswer{"Unauthorized", 401, false, "HTTP 401: injected failure"},
                      BadAnswer{"Forbidden", 403, false, "HTTP 403: injected failure"},
                      BadAnswer{"Conflict", 409, false, "HTTP 409: injected failure"},
                      BadAnswer{"ServerError", 500, false, "HTTP 500: injected failure"},
                      BadAnswer{"Garbage", 0, true, "the answer is not a JSON object"}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(NodeConditionsSink, AHungApiServerTimesOutAndStopIsBounded) {
  FakeApiServer server;
  server.hang_ = 3000ms;
  Harness h(server, fast_options(), 300ms);
  auto began = SteadyClock::now();
  h.sink.run_once(began);
  EXPECT_LT(SteadyClock::now() - began, 2s);
  EXPECT_THAT(h.sink.status().error, HasSubstr("no answer from"));
  // On its own thread, stopped in the middle of a hung call.
  FakeApiServer hung;
  hung.hang_ = 5000ms;
  Harness threaded(hung, fast_options(), 4000ms);
  threaded.sink.start();
  std::this_thread::sleep_for(300ms);
  began = SteadyClock::now();
  threaded.sink.stop();
  EXPECT_LT(SteadyClock::now() - began, 2s);
}

TEST(NodeConditionsSink, AWrongTokenIsUnauthorized) {
  FakeApiServer server;
  KubernetesNodeConditions sink(api_for(server.url(), "wrong"), fast_options(),
                                [] { return healthy_node(); });
  sink.run_once(SteadyClock::now());
  EXPECT_THAT(sink.status().error, HasSubstr("GET /api/v1/nodes/node-1: HTTP 401: Unauthorized"));
}

TEST(KubernetesApi, TlsIsVerifiedAgainstTheGivenCa) {
  auto material = server::generate_self_signed();
  ASSERT_TRUE(material);
  auto tls = server::make_tls_server(*material);
  ASSERT_TRUE(tls);
  FakeApiServer server(std::move(*tls));
  KubernetesConnection c;
  c.server = server.url("https");
  c.token = "secret";
  c.ca_pem = material->cert_pem;
  auto api = KubernetesApi::create(c, 2000ms);
  ASSERT_TRUE(api) << api.error().message;
  auto node = (*api)->call("GET", "/api/v1/nodes/node-1");
  ASSERT_TRUE(node) << node.error().message;
  EXPECT_EQ((*node)["kind"], "Node");
  // Another CA: refused.
  auto other = server::generate_self_signed();
  ASSERT_TRUE(other);
  c.ca_pem = other->cert_pem;
  auto refused = KubernetesApi::create(c, 2000ms);
  ASSERT_TRUE(refused);
  auto r = (*refused)->call("GET", "/api/v1/nodes/node-1");
  ASSERT_FALSE(r);
  EXPECT_THAT(r.error().message, HasSubstr("not signed by the configured CA"));
}

TEST(KubernetesApi, BadServersAndCertificatesAreRefusedAtCreate) {
  KubernetesConnection c;
  c.server = "ftp://x";
  EXPECT_FALSE(KubernetesApi::create(c, 1000ms));
  c.server = "https://host:99999";
  EXPECT_FALSE(KubernetesApi::create(c, 1000ms));
  c.server = "https://host/path";
  EXPECT_FALSE(KubernetesApi::create(c, 1000ms));
  c.server = "https://host:6443";
  c.ca_pem = "not a certificate";
  auto r = KubernetesApi::create(c, 1000ms);
  ASSERT_FALSE(r);
  EXPECT_THAT(r.error().message, HasSubstr("no PEM certificate"));
}

}  // namespace
}  // namespace gpud::sinks
