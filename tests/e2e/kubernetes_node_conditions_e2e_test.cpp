// End-to-end: `gpud run --kubernetes-node-conditions` on the fake NVML against the test API server
// (testing/kube_apiserver/kube_apiserver.mjs, which checks every body against the Kubernetes
// OpenAPI schema), read back by Debian's real kubectl as an operator would: a GPU fault sets
// GpudGPUProblem True with the GPU named and an Event, recovery sets it False, and an API server
// that answers 401/403/409/500, garbage or nothing makes the gpud component Degraded with the
// reason while the checks go on. Skips when kubectl, node or the schema package is missing.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>

#include "tests/e2e/daemon_process.h"

namespace gpud::e2e {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

constexpr const char* kNode = "gpu-node-1";

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write_atomic(const std::string& path, const std::string& body) {
  std::string tmp = path + ".tmp";
  std::ofstream(tmp) << body;
  fs::rename(tmp, path);
}

std::string nvml_fixture(const std::string& name) {
  return slurp(std::string(GPUD_SOURCE_DIR) + "/testing/fixtures/nvml/" + name);
}

std::string program(const char* name) {
  auto r = shell(std::string("command -v ") + name);
  std::string path = r.out.substr(0, r.out.find('\n'));
  return r.exit_code == 0 ? path : "";
}

// The test API server as a child process.
class TestApiServer {
 public:
  TestApiServer(const std::string& dir, const std::string& node_modules) {
    int out[2];
    if (pipe(out) != 0) return;
    pid_ = fork();
    if (pid_ == 0) {
      dup2(out[1], 1);
      int err = open((dir + "/apiserver.log").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
      if (err >= 0) dup2(err, 2);
      close(out[0]);
      setenv("GPUD_K8S_NODE_MODULES", node_modules.c_str(), 1);
      const std::string script =
          std::string(GPUD_SOURCE_DIR) + "/testing/kube_apiserver/kube_apiserver.mjs";
      execlp("node", "node", script.c_str(), dir.c_str(), kNode, nullptr);
      _exit(127);
    }
    close(out[1]);
    std::string line;
    char c;
    while (read(out[0], &c, 1) == 1 && c != '\n') line += c;
    close(out[0]);
    auto j = parse_json(line);
    if (j.is_object() && j.contains("port")) {
      port_ = j["port"];
      kubeconfig_ = j["kubeconfig"];
    }
  }
  ~TestApiServer() {
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      waitpid(pid_, nullptr, 0);
    }
  }
  bool ready() const { return port_ > 0; }
  const std::string& kubeconfig() const { return kubeconfig_; }
  // A control request (no token needed).
  nlohmann::json control(const std::string& method, const std::string& path,
                         const std::string& body = "") const {
    httplib::SSLClient cli("127.0.0.1", port_);
    cli.enable_server_certificate_verification(false);
    cli.set_read_timeout(5, 0);
    auto r =
        method == "GET" ? cli.Get(path.c_str()) : cli.Post(path.c_str(), body, "application/json");
    return r ? parse_json(r->body) : nlohmann::json();
  }
  void fault(const nlohmann::json& f) const { control("POST", "/gpud-test/fault", f.dump()); }
  nlohmann::json log() const { return control("GET", "/gpud-test/log"); }

 private:
  pid_t pid_ = -1;
  int port_ = 0;
  std::string kubeconfig_;
};

class KubernetesNodeConditionsE2E : public ::testing::Test {
 protected:
  void SetUp() override {
    kubectl_ = program("kubectl");
    if (kubectl_.empty())
      GTEST_SKIP() << "kubectl not found (install-deps installs kubernetes-client)";
    if (program("node").empty()) GTEST_SKIP() << "node not found";
    // The build's `npm ci` (target kubernetes_validator) installs the schema package; the
    // environment variable points elsewhere when set.
    const char* modules = std::getenv("GPUD_K8S_NODE_MODULES");
    modules_ = modules != nullptr ? modules : GPUD_K8S_NODE_MODULES_DIR;
    if (!fs::exists(modules_ + "/kubernetes-models"))
      GTEST_SKIP() << modules_
                   << "/kubernetes-models is missing (the build installs it with npm "
                      "where node and npm are found)";
  }

  // `kubectl --kubeconfig K get node` as JSON; null when it fails.
  nlohmann::json kubectl_node(const TestApiServer& api) const {
    auto r = shell(kubectl_ + " --kubeconfig " + api.kubeconfig() + " get node " + kNode +
                   " -o json 2>/dev/null");
    return r.exit_code == 0 ? parse_json(r.out) : nlohmann::json();
  }
  // The Node's condition of `type`; an empty object when it has none.
  static nlohmann::json condition(const nlohmann::json& node, const std::string& type) {
    if (!node.is_object() || !node.contains("status")) return nlohmann::json::object();
    for (const auto& c : node["status"].value("conditions", nlohmann::json::array()))
      if (c.value("type", "") == type) return c;
    return nlohmann::json::object();
  }

  // The test API server, a healthy fake-NVML scenario, and gpud keeping the Node's conditions
  // through the server's kubeconfig (with `extra` flags).
  void start(const std::vector<std::string>& extra = {}) {
    dir_ = make_temp_dir();
    api_ = std::make_unique<TestApiServer>(dir_, modules_);
    ASSERT_TRUE(api_->ready()) << slurp(dir_ + "/apiserver.log");
    scenario_ = dir_ + "/scenario.json";
    write_atomic(scenario_, nvml_fixture("h100x8-healthy.json"));
    std::vector<std::string> args = {"--nvml-lib",
                                     GPUD_FAKE_NVML,
                                     "--nvidia-check-interval",
                                     "1s",
                                     "--kubernetes-node-conditions",
                                     "--kubeconfig",
                                     api_->kubeconfig(),
                                     "--kubernetes-node-name",
                                     kNode,
                                     "--kubernetes-poll-interval",
                                     "200ms",
                                     "--kubernetes-min-write-interval",
                                     "300ms"};
    args.insert(args.end(), extra.begin(), extra.end());
    gpud_ = std::make_unique<DaemonProcess>(
        dir_ + "/data", args, true, std::vector<std::string>{"FAKE_NVML_SCENARIO=" + scenario_});
    ASSERT_TRUE(gpud_->ready()) << gpud_->log();
  }
  void TearDown() override {
    gpud_.reset();
    api_.reset();
    if (!dir_.empty()) fs::remove_all(dir_);
  }

  std::string kubectl_;
  std::string modules_;
  std::string dir_;
  std::string scenario_;
  std::unique_ptr<TestApiServer> api_;
  std::unique_ptr<DaemonProcess> gpud_;
};

TEST_F(KubernetesNodeConditionsE2E, GpuFaultAndRecoveryAreOnTheNodeAsKubectlReadsIt) {
  ASSERT_NO_FATAL_FAILURE(start());
  const TestApiServer& api = *api_;
  DaemonProcess& d = *gpud_;
  const std::string& scenario = scenario_;

  nlohmann::json node;
  auto gpu_condition_is = [&](const char* status) {
    node = kubectl_node(api);
    return condition(node, "GpudGPUProblem").value("status", "") == status;
  };
  ASSERT_TRUE(eventually([&] { return gpu_condition_is("False"); }, 30s)) << node.dump() << d.log();
  EXPECT_EQ(condition(node, "GpudGPUProblem")["reason"], "GPUsHealthy");
  EXPECT_EQ(condition(node, "Ready")["status"], "True");  // the kubelet's condition is kept
  EXPECT_FALSE(condition(node, "GpudKernelProblem").empty());

  // GPU 3's volatile uncorrectable ECC errors.
  write_atomic(scenario, nvml_fixture("h100x8-ecc-volatile-uncorrectable.json"));
  ASSERT_TRUE(eventually([&] { return gpu_condition_is("True"); }, 30s)) << node.dump();
  auto c = condition(node, "GpudGPUProblem");
  EXPECT_EQ(c["reason"], "GPUUnhealthy");
  const std::string message = c["message"];
  EXPECT_NE(message.find("GPU 3 (bus 0000:5d:00.0, GPU-1d2e3f40-5a6b-7c8d-9e0f-1a2b3c4d5e03)"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("accelerator-nvidia-ecc"), std::string::npos) << message;
  EXPECT_NE(message.find("suggested action "), std::string::npos) << message;

  // What an operator sees: the condition and the Warning event.
  auto describe = shell(kubectl_ + " --kubeconfig " + api.kubeconfig() + " describe node " + kNode);
  ASSERT_EQ(describe.exit_code, 0) << describe.out;
  EXPECT_NE(describe.out.find("GpudGPUProblem"), std::string::npos) << describe.out;
  EXPECT_NE(describe.out.find("GPUUnhealthy"), std::string::npos) << describe.out;
  EXPECT_NE(describe.out.find("Warning"), std::string::npos) << describe.out;
  auto events = shell(kubectl_ + " --kubeconfig " + api.kubeconfig() +
                      " get events -A -o json --field-selector involvedObject.name=" + kNode);
  auto list = parse_json(events.out);
  ASSERT_TRUE(list.is_object()) << events.out;
  bool warning = false;
  for (const auto& e : list["items"])
    warning = warning || (e["type"] == "Warning" && e["reason"] == "GPUUnhealthy" &&
                          e["involvedObject"]["uid"] == node["metadata"]["uid"]);
  EXPECT_TRUE(warning) << list.dump();

  // Recovery.
  write_atomic(scenario, nvml_fixture("h100x8-healthy.json"));
  ASSERT_TRUE(eventually([&] { return gpu_condition_is("False"); }, 30s)) << node.dump();
  EXPECT_NE(condition(node, "GpudGPUProblem")["lastTransitionTime"], c["lastTransitionTime"]);
  ASSERT_TRUE(eventually(
      [&] {
        const nlohmann::json log = api.log();
        for (const auto& e : log["events"])
          if (e["type"] == "Normal" && e["reason"] == "GPUsHealthy") return true;
        return false;
      },
      10s))
      << api.log().dump();

  // Every body gpud sent passed the Kubernetes schema; every write was a strategic-merge patch.
  auto log = api.log();
  EXPECT_EQ(log["schemaErrors"], nlohmann::json::array()) << log["schemaErrors"].dump();
  for (const auto& r : log["requests"]) {
    if (r["method"] == "PATCH") {
      EXPECT_EQ(r["contentType"], "application/strategic-merge-patch+json") << r.dump();
    }
  }
  d.stop();
}

struct BadAnswer {
  const char* name;
  nlohmann::json fault;
  const char* reason;
};

TEST_F(KubernetesNodeConditionsE2E, BadAnswersMakeGpudDegradedWithTheReasonNotTheChecks) {
  // A short resync, so that gpud writes every second and meets each bad answer.
  ASSERT_NO_FATAL_FAILURE(start({"--kubernetes-resync-interval", "1s", "--kubernetes-max-backoff",
                                 "1s", "--kubernetes-api-timeout", "1s"}));
  const TestApiServer& api = *api_;
  DaemonProcess& d = *gpud_;
  // The gpud component checked now (it runs every 10 s), its state.
  auto gpud_state = [&] {
    auto r = d.get("/v1/components/trigger-check?componentName=gpud");
    auto states = r && r->status == 200 ? parse_json(r->body) : nlohmann::json();
    if (!states.is_array() || states.empty() || states[0]["states"].empty())
      return nlohmann::json::object();
    return states[0]["states"][0];
  };
  auto gpud_reason = [&] { return gpud_state().value("reason", std::string()); };
  ASSERT_TRUE(eventually(
      [&] {
        return !condition(kubectl_node(api), "GpudGPUProblem").empty() &&
               gpud_reason().find("kubernetes-node-conditions") == std::string::npos;
      },
      30s))
      << gpud_reason();

  const BadAnswer answers[] = {
      {"401", {{"status", 401}}, "HTTP 401: injected 401 by the test"},
      {"403", {{"status", 403}}, "HTTP 403: injected 403 by the test"},
      {"409", {{"status", 409}}, "HTTP 409: injected 409 by the test"},
      {"500", {{"status", 500}}, "HTTP 500: injected 500 by the test"},
      {"garbage", {{"mode", "garbage"}}, "the answer is not a JSON object"},
      {"hang", {{"mode", "hang"}}, "no answer from https://127.0.0.1:"},
  };
  for (const BadAnswer& bad : answers) {
    SCOPED_TRACE(bad.name);
    api.fault(bad.fault);
    nlohmann::json gpud;
    EXPECT_TRUE(eventually(
        [&] {
          gpud = gpud_state();
          return gpud.value("health", "") == "Degraded" &&
                 gpud.value("reason", "").find("kubernetes-node-conditions: ") !=
                     std::string::npos &&
                 gpud.value("reason", "").find(bad.reason) != std::string::npos;
        },
        20s))
        << gpud.dump();
    // The checks go on: the NVIDIA components stay Healthy and fresh, /healthz answers.
    auto ecc = component_state(d, "accelerator-nvidia-ecc");
    EXPECT_EQ(ecc.value("health", ""), "Healthy") << ecc.dump();
    auto healthz = d.get("/healthz");
    ASSERT_TRUE(healthz);
    EXPECT_EQ(healthz->status, 200);
  }
  api.fault(nlohmann::json::object());
  EXPECT_TRUE(eventually(
      [&] { return gpud_reason().find("kubernetes-node-conditions") == std::string::npos; }, 20s))
      << gpud_reason();
  // Rate-limited: many failed calls, few log lines.
  int failed_calls = 0;
  const nlohmann::json requests = api.log()["requests"];
  for (const auto& r : requests)
    if (r.value("userAgent", "") == "gpud" && r.value("status", 200) >= 400) ++failed_calls;
  EXPECT_GE(failed_calls, 4);  // at least one per HTTP error
  size_t lines = 0;
  const std::string log = d.log();
  for (size_t at = log.find("cannot keep node"); at != std::string::npos;
       at = log.find("cannot keep node", at + 1))
    ++lines;
  EXPECT_GE(lines, 1U) << log;
  EXPECT_LE(lines, 2U) << log;
  EXPECT_LT(lines, static_cast<size_t>(failed_calls)) << log;
  d.stop();
}

TEST_F(KubernetesNodeConditionsE2E, WithoutANodeNameRunRefusesToStart) {
  std::string dir = make_temp_dir();
  TempDirGuard guard{dir};
  auto r = run_gpud({"run", "--kubernetes-node-conditions", "--db-in-memory", "--data-dir", dir});
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.out.find("NODE_NAME"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace gpud::e2e
