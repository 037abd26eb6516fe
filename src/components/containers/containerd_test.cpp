#include "components/containers/containerd.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "host/unix_socket_owner.h"
#include "runtimes/container_directory.h"
#include "runtimes/container_source.h"
#include "testing/fake_command.h"

namespace gpud::components {
namespace {

using namespace std::chrono_literals;

std::string fixture(const std::string& rel) {
  return std::string(GPUD_SOURCE_DIR) + "/testing/fixtures/" + rel;
}

std::string read_fixture(const std::string& rel) {
  std::ifstream in(fixture(rel));
  return std::string(std::istreambuf_iterator<char>(in), {});
}

const TimePoint kNow = TimePoint(std::chrono::seconds(1'800'000'000));

runtimes::CriSandbox sandbox(std::string id, std::string name, std::chrono::seconds age,
                             bool ready = true) {
  runtimes::CriSandbox s;
  s.id = std::move(id);
  s.name = std::move(name);
  s.pod_namespace = "gpu-operator";
  s.uid = "uid-" + s.id;
  s.state = ready ? "SANDBOX_READY" : "SANDBOX_NOTREADY";
  s.created = kNow - age;
  return s;
}

// A containerd that answers, with one workload pod and one container.
ContainerdSnapshot running() {
  ContainerdSnapshot s;
  s.now = kNow;
  s.socket = "/run/containerd/containerd.sock";
  s.uptime = 3h;
  host::UnitState u;
  u.id = "containerd.service";
  u.load_state = "loaded";
  u.active_state = "active";
  u.sub_state = "running";
  s.service = Result<host::UnitState>(u);
  runtimes::CriPods pods;
  pods.sandboxes.push_back(sandbox("aaa111", "trainer-0", 2h));
  pods.sandboxes.back().pod_namespace = "ml";
  runtimes::CriContainer c;
  c.id = "ccc333";
  c.name = "main";
  c.sandbox_id = "aaa111";
  c.state = "CONTAINER_RUNNING";
  c.created = kNow - 1h;
  c.image = "nvcr.io/nvidia/pytorch:24.05";
  pods.containers.push_back(c);
  s.pods = Result<runtimes::CriPods>(pods);
  s.config_path = "/etc/containerd/config.toml";
  return s;
}

host::UnitState unit(const std::string& active, const std::string& sub,
                     const std::string& load = "loaded") {
  host::UnitState u;
  u.id = "containerd.service";
  u.load_state = load;
  u.active_state = active;
  u.sub_state = sub;
  return u;
}

ContainerdSnapshot with_toolkit(std::chrono::seconds age, bool ready = true) {
  ContainerdSnapshot s = running();
  s.nvidia_gpus = true;
  s.pods->value().sandboxes.push_back(
      sandbox("ttt222", "nvidia-container-toolkit-daemonset-x7k2p", age, ready));
  return s;
}

ContainerdNvidiaRuntime runtime_config(bool configured) {
  ContainerdNvidiaRuntime r;
  r.configured = configured;
  r.read = {"/etc/containerd/config.toml"};
  if (configured) r.found_in = "/etc/containerd/config.toml: default_runtime_name = \"nvidia\"";
  return r;
}

TEST(ContainerdRule, NotInstalledIsHealthy) {
  ContainerdSnapshot s;
  s.installed = false;
  CheckResult r = evaluate_containerd(s);
  EXPECT_EQ(r.health(), Health::kHealthy);
  EXPECT_EQ(r.states[0].reason, "containerd is not installed");
}

TEST(ContainerdRule, RunningListsSandboxesWithTheirContainers) {
  CheckResult r = evaluate_containerd(running());
  EXPECT_EQ(r.health(), Health::kHealthy) << r.summary();
  EXPECT_EQ(r.states[0].reason, "containerd is running (1 pod sandboxes, 1 containers)");
  auto data = r.states[0].data;
  ASSERT_EQ(data["sandboxes"].size(), 1u);
  const auto& p = data["sandboxes"][0];
  EXPECT_EQ(p["id"], "aaa111");
  EXPECT_EQ(p["name"], "trainer-0");
  EXPECT_EQ(p["namespace"], "ml");
  EXPECT_EQ(p["state"], "SANDBOX_READY");
  EXPECT_EQ(p["created"], "2027-01-15T06:00:00Z");
  ASSERT_EQ(p["containers"].size(), 1u);
  EXPECT_EQ(p["containers"][0]["id"], "ccc333");
  EXPECT_EQ(p["containers"][0]["name"], "main");
  EXPECT_EQ(p["containers"][0]["state"], "CONTAINER_RUNNING");
  EXPECT_EQ(p["containers"][0]["created"], "2027-01-15T07:00:00Z");
  EXPECT_EQ(data["service_active_state"], "active");
  EXPECT_EQ(data["uptime_seconds"], 3 * 3600);
}

TEST(ContainerdRule, MissingSocketIsHealthyForFourChecksThenUnhealthy) {
  ContainerdSnapshot s = running();
  s.socket_exists = false;
  s.pods.reset();
  s.uptime.reset();
  for (int n = 1; n <= 4; ++n) {
    s.socket_missing_checks = n;
    CheckResult r = evaluate_containerd(s);
    EXPECT_EQ(r.health(), Health::kHealthy) << n;
    EXPECT_EQ(r.states[0].reason, fmt::format("containerd socket /run/containerd/containerd.sock "
                                              "not found ({} of 5 checks)",
                                              n));
  }
  s.socket_missing_checks = 5;
  CheckResult r = evaluate_containerd(s);
  EXPECT_EQ(r.health(), Health::kUnhealthy);
  EXPECT_EQ(r.states[0].reason,
            "containerd socket /run/containerd/containerd.sock not found in 5 consecutive checks");
}

TEST(ContainerdRule, MissingSocketOnACrioHostIsHealthy) {
  ContainerdSnapshot s = running();
  s.socket_exists = false;
  s.socket_missing_checks = 9;
  s.pods.reset();
  s.crio_answers = true;
  CheckResult r = evaluate_containerd(s);
  EXPECT_EQ(r.health(), Health::kHealthy);
  EXPECT_EQ(r.states[0].reason,
            "containerd socket /run/containerd/containerd.sock not found; CRI-O is running");
}

TEST(ContainerdRule, NotConnectableIsInstalledButNotRunning) {
  ContainerdSnapshot s = running();
  s.uptime.reset();
  s.pods = Result<runtimes::CriPods>(
      make_error("cannot connect to unix:/run/containerd/containerd.sock within 10000 ms",
                 GPUD_CRI_UNAVAILABLE));
  CheckResult r = evaluate_containerd(s);
  EXPECT_EQ(r.health(), Health::kUnhealthy);
  EXPECT_EQ(r.states[0].reason, "containerd installed but not running");
  EXPECT_EQ(r.states[0].error,
            "cannot connect to unix:/run/containerd/containerd.sock within 10000 ms");
}

TEST(ContainerdRule, InactiveServiceIsUnhealthyAndAnUnknownUnitIsNotJudged) {
  ContainerdSnapshot s = running();
  s.service = Result<host::UnitState>(unit("failed", "failed"));
  CheckResult r = evaluate_containerd(s);
  EXPECT_EQ(r.health(), Health::kUnhealthy);
  EXPECT_EQ(r.states[0].reason, "containerd service is failed (failed)");
  s.service = Result<host::UnitState>(unit("inactive", "dead", "not-found"));
  EXPECT_EQ(evaluate_containerd(s).health(), Health::kHealthy);
}

TEST(ContainerdRule, AYoungContainerdGetsAGrace) {
  ContainerdSnapshot s = running();
  s.uptime = 2min;
  s.service = Result<host::UnitState>(unit("activating", "start"));
  CheckResult r = evaluate_containerd(s);
  EXPECT_EQ(r.health(), Health::kHealthy);
  EXPECT_EQ(r.states[0].reason,
            "containerd service is activating (start); containerd has not been running for long "
            "enough");
  s.pods = Result<runtimes::CriPods>(make_error("cannot connect", GPUD_CRI_UNAVAILABLE));
  r = evaluate_containerd(s);
  EXPECT_EQ(r.health(), Health::kHealthy);
  EXPECT_EQ(r.states[0].reason,
            "containerd installed but not running; containerd has not been running for long "
            "enough");
  s.uptime = 5min;
  EXPECT_EQ(evaluate_containerd(s).health(), Health::kUnhealthy);
}

TEST(ContainerdRule, ListErrorsUnimplementedAndAMissingModule) {
  ContainerdSnapshot s = running();
  s.pods = Result<runtimes::CriPods>(
      make_error("ListPodSandbox: sandbox store is corrupt", GPUD_CRI_INTERNAL));
  CheckResult r = evaluate_containerd(s);
  EXPECT_EQ(r.health(), Health::kUnhealthy);
  EXPECT_EQ(r.states[0].reason, "containerd CRI listing failed");
  EXPECT_EQ(r.states[0].error, "ListPodSandbox: sandbox store is corrupt");
  s.pods = Result<runtimes::CriPods>(make_error(
      "ListPodSandbox: unknown service runtime.v1.RuntimeService", GPUD_CRI_UNIMPLEMENTED));
  r = evaluate_containerd(s);
  EXPECT_EQ(r.health(), Health::kHealthy);
  EXPECT_EQ(r.states[0].reason, "containerd is running; CRI is not enabled");
  s.pods = Result<runtimes::CriPods>(
      make_error("the cri module (libgpud-cri.so) is not in /x", runtimes::kCriModuleMissing));
  r = evaluate_containerd(s);
  EXPECT_EQ(r.health(), Health::kDegraded);
  EXPECT_EQ(r.states[0].error, "the cri module (libgpud-cri.so) is not in /x");
}

TEST(ContainerdRule, ToolkitPodWithoutTheNvidiaRuntimeIsUnhealthy) {
  ContainerdSnapshot s = with_toolkit(11min);
  s.nvidia_runtime = Result<ContainerdNvidiaRuntime>(runtime_config(false));
  CheckResult r = evaluate_containerd(s);
  EXPECT_EQ(r.health(), Health::kUnhealthy);
  EXPECT_EQ(r.states[0].reason,
            "nvidia-container-toolkit pod gpu-operator/nvidia-container-toolkit-daemonset-x7k2p "
            "has been ready for 11m but /etc/containerd/config.toml (and its imports) configures "
            "no nvidia runtime");
  // A missing config is containerd's defaults: no nvidia runtime either.
  s.nvidia_runtime = Result<ContainerdNvidiaRuntime>(
      make_error("cannot read /etc/containerd/config.toml: No such file or directory"));
  r = evaluate_containerd(s);
  EXPECT_EQ(r.health(), Health::kUnhealthy);
  EXPECT_EQ(r.states[0].error,
            "cannot read /etc/containerd/config.toml: No such file or directory");
  s.nvidia_runtime = Result<ContainerdNvidiaRuntime>(runtime_config(true));
  r = evaluate_containerd(s);
  EXPECT_EQ(r.health(), Health::kHealthy);
  EXPECT_EQ(r.states[0].data["nvidia_runtime"],
            "/etc/containerd/config.toml: default_runtime_name = \"nvidia\"");
}

TEST(ContainerdRule, AYoungOrNotReadyToolkitPodOrNoGpuIsNotJudged) {
  ContainerdSnapshot s = with_toolkit(9min);
  s.nvidia_runtime = Result<ContainerdNvidiaRuntime>(runtime_config(false));
  EXPECT_EQ(evaluate_containerd(s).health(), Health::kHealthy);
  s = with_toolkit(2h, /*ready=*/false);
  s.nvidia_runtime = Result<ContainerdNvidiaRuntime>(runtime_config(false));
  CheckResult r = evaluate_containerd(s);
  EXPECT_EQ(r.health(), Health::kHealthy);
  EXPECT_EQ(r.states[0].reason,
            "containerd is running (2 pod sandboxes, 1 containers); nvidia-container-toolkit pod "
            "not found");
  s = with_toolkit(2h);
  s.nvidia_gpus = false;
  s.nvidia_runtime = Result<ContainerdNvidiaRuntime>(runtime_config(false));
  r = evaluate_containerd(s);
  EXPECT_EQ(r.health(), Health::kHealthy);
  EXPECT_EQ(r.states[0].reason, "containerd is running (2 pod sandboxes, 1 containers)");
}

TEST(ContainerdRule, AnInjectedAgeJudgesAYoungToolkitPod) {
  ContainerdSnapshot s = with_toolkit(30s);
  s.toolkit_min_age = 10s;
  s.nvidia_runtime = Result<ContainerdNvidiaRuntime>(runtime_config(false));
  EXPECT_EQ(evaluate_containerd(s).health(), Health::kUnhealthy);
}

TEST(ContainerdConfig, TheThreeFormsAndNone) {
  EXPECT_EQ(
      containerd_nvidia_runtime_form(read_fixture("containerd/forms/default-runtime-name.toml")),
      "default_runtime_name = \"nvidia\"");
  EXPECT_EQ(containerd_nvidia_runtime_form(read_fixture("containerd/forms/runtimes-v1.toml")),
            "[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.nvidia]");
  EXPECT_EQ(containerd_nvidia_runtime_form(read_fixture("containerd/forms/runtimes-v2.toml")),
            "[plugins.\"io.containerd.cri.v1.runtime\".containerd.runtimes.nvidia.options]");
  EXPECT_EQ(containerd_nvidia_runtime_form(read_fixture("containerd/forms/runc-only.toml")), "");
  // A dotted key below the table counts as the table.
  EXPECT_EQ(
      containerd_nvidia_runtime_form("[plugins.\"io.containerd.grpc.v1.cri\".containerd]\n"
                                     "runtimes.nvidia.runtime_type = \"io.containerd.runc.v2\"\n"),
      "plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.nvidia.runtime_type");
  EXPECT_EQ(containerd_nvidia_runtime_form("x = \"# default_runtime_name = 'nvidia'\"\n"), "");
}

TEST(ContainerdConfig, Imports) {
  EXPECT_EQ(
      containerd_config_imports(read_fixture("containerd/host-imports/etc/containerd/config.toml")),
      (std::vector<std::string>{"/etc/containerd/conf.d/*.toml", "extra/missing.toml"}));
  EXPECT_TRUE(containerd_config_imports(read_fixture("containerd/forms/runc-only.toml")).empty());
  // Only a top-level key is the imports list.
  EXPECT_TRUE(containerd_config_imports("[plugins.x]\nimports = [\"/a.toml\"]\n").empty());
}

TEST(ContainerdConfig, TheNvidiaRuntimeInAnImportedDropIn) {
  host::HostFs fs(fixture("containerd/host-imports"));
  auto r = read_containerd_nvidia_runtime(fs, "/etc/containerd/config.toml");
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_TRUE(r->configured);
  EXPECT_EQ(r->found_in,
            "/etc/containerd/conf.d/99-nvidia.toml: "
            "[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.nvidia]");
  EXPECT_EQ(r->read, (std::vector<std::string>{"/etc/containerd/config.toml",
                                               "/etc/containerd/conf.d/10-registry.toml",
                                               "/etc/containerd/conf.d/99-nvidia.toml"}));
}

TEST(ContainerdConfig, NoNvidiaRuntimeAnywhereAndAMissingConfig) {
  host::HostFs fs(fixture("containerd/host-no-nvidia"));
  auto r = read_containerd_nvidia_runtime(fs, "/etc/containerd/config.toml");
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_FALSE(r->configured);
  // The relative glob is read against the config's folder; the self-import is read once.
  EXPECT_EQ(r->read, (std::vector<std::string>{"/etc/containerd/config.toml",
                                               "/etc/containerd/conf.d/10-runc.toml"}));
  host::HostFs missing(fixture("containerd/host-missing-config"));
  auto m = read_containerd_nvidia_runtime(missing, "/etc/containerd/config.toml");
  ASSERT_FALSE(m);
  EXPECT_NE(m.error().message.find("cannot read /etc/containerd/config.toml"), std::string::npos);
}

TEST(ContainerdConfig, NativeCdiFormsAndSpecDirectories) {
  EXPECT_EQ(
      containerd_cdi_form(read_fixture("containerd/host-native-cdi/etc/containerd/config.toml")),
      "[plugins.\"io.containerd.grpc.v1.cri\"] enable_cdi = true");
  EXPECT_EQ(containerd_cdi_form(
                read_fixture("containerd/host-cdi-no-nvidia-spec/etc/containerd/config.toml")),
            "[plugins.\"io.containerd.cri.v1.runtime\"] enable_cdi = true");
  EXPECT_EQ(containerd_cdi_form("plugins.\"io.containerd.grpc.v1.cri\".enable_cdi = true\n"),
            "[plugins.\"io.containerd.grpc.v1.cri\"] enable_cdi = true");
  // Off, commented out, or in another plugin's table: not native CDI.
  EXPECT_EQ(containerd_cdi_form("[plugins.\"io.containerd.grpc.v1.cri\"]\nenable_cdi = false\n"),
            "");
  EXPECT_EQ(containerd_cdi_form("[plugins.\"io.containerd.grpc.v1.cri\"]\n# enable_cdi = true\n"),
            "");
  EXPECT_EQ(containerd_cdi_form("[plugins.\"io.containerd.nri.v1.nri\"]\nenable_cdi = true\n"), "");
  EXPECT_EQ(containerd_cdi_spec_dirs("[plugins.x]\ncdi_spec_dirs = [\n  \"/opt/cdi\",\n]\n"),
            (std::vector<std::string>{"/opt/cdi"}));
  EXPECT_EQ(containerd_cdi_spec_dirs("[plugins.x]\nenable_cdi = true\n"),
            (std::vector<std::string>{"/etc/cdi", "/var/run/cdi"}));
  EXPECT_TRUE(nvidia_cdi_spec(read_fixture("containerd/host-native-cdi/var/run/cdi/nvidia.yaml")));
  EXPECT_TRUE(
      nvidia_cdi_spec("{\"cdiVersion\":\"0.5.0\",\"kind\": \"nvidia.com/gpu\",\"devices\":[]}"));
  EXPECT_FALSE(
      nvidia_cdi_spec(read_fixture("containerd/host-native-cdi/etc/cdi/vendor-fpga.yaml")));
  EXPECT_FALSE(nvidia_cdi_spec("kind: nvidia.com/gpu-mig\n"));
}

TEST(ContainerdConfig, NativeCdiWithAnNvidiaSpecIsAValidNvidiaSetup) {
  host::HostFs fs(fixture("containerd/host-native-cdi"));
  auto r = read_containerd_nvidia_runtime(fs, "/etc/containerd/config.toml");
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_TRUE(r->configured);
  EXPECT_EQ(
      r->found_in,
      "/etc/containerd/config.toml: [plugins.\"io.containerd.grpc.v1.cri\"] enable_cdi = true");
  EXPECT_EQ(r->cdi_spec, "/var/run/cdi/nvidia.yaml");
  // The rule: a toolkit pod old enough, and native CDI instead of an nvidia runtime: Healthy.
  ContainerdSnapshot s = with_toolkit(11min);
  s.nvidia_runtime = r;
  CheckResult c = evaluate_containerd(s);
  EXPECT_EQ(c.health(), Health::kHealthy) << c.summary();
  EXPECT_EQ(c.states[0].data["nvidia_cdi_spec"], "/var/run/cdi/nvidia.yaml");
}

TEST(ContainerdConfig, CdiEnabledWithoutAnNvidiaSpecIsNotConfigured) {
  host::HostFs fs(fixture("containerd/host-cdi-no-nvidia-spec"));
  auto r = read_containerd_nvidia_runtime(fs, "/etc/containerd/config.toml");
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_FALSE(r->configured);
  ASSERT_EQ(r->errors.size(), 1u);
  EXPECT_EQ(r->errors[0],
            "/etc/containerd/config.toml enables CDI, but no nvidia.com/gpu CDI spec is in "
            "/etc/cdi or /var/run/cdi");
  ContainerdSnapshot s = with_toolkit(11min);
  s.nvidia_runtime = r;
  CheckResult c = evaluate_containerd(s);
  EXPECT_EQ(c.health(), Health::kUnhealthy);
  EXPECT_NE(c.states[0].error.find("enables CDI, but no nvidia.com/gpu CDI spec"),
            std::string::npos)
      << c.states[0].error;
}

TEST(ContainerdConfig, K3sAndRke2WriteTheNvidiaRuntimeTableWithAQuotedName) {
  host::HostFs k3s(fixture("containerd/host-k3s"));
  auto r = read_containerd_nvidia_runtime(k3s, std::string(kContainerdLayouts[1].config));
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_TRUE(r->configured);
  EXPECT_EQ(r->found_in,
            "/var/lib/rancher/k3s/agent/etc/containerd/config.toml: "
            "[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.nvidia]");
  host::HostFs rke2(fixture("containerd/host-rke2"));
  r = read_containerd_nvidia_runtime(rke2, std::string(kContainerdLayouts[2].config));
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_TRUE(r->configured);
  EXPECT_EQ(r->found_in,
            "/var/lib/rancher/rke2/agent/etc/containerd/config.toml: "
            "[plugins.\"io.containerd.cri.v1.runtime\".containerd.runtimes.nvidia]");
  host::HostFs none(fixture("containerd/host-k3s-no-nvidia"));
  r = read_containerd_nvidia_runtime(none, std::string(kContainerdLayouts[1].config));
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_FALSE(r->configured);
  // A quoted segment that holds a dot stays one segment: not the nvidia runtime's table.
  EXPECT_EQ(containerd_nvidia_runtime_form(
                "[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.\"nvidia.x\"]\n"),
            "");
  EXPECT_EQ(containerd_nvidia_runtime_form(
                "[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.\"nvidia-cdi\"]\n"),
            "");
}

TEST(ContainerdConfig, DisabledCriPlugin) {
  EXPECT_TRUE(containerd_cri_disabled("disabled_plugins = [\"cri\"]\n"));
  EXPECT_TRUE(containerd_cri_disabled("disabled_plugins = [\n  'io.containerd.grpc.v1.cri',\n]\n"));
  EXPECT_FALSE(containerd_cri_disabled("disabled_plugins = []\n"));
  EXPECT_FALSE(containerd_cri_disabled("[plugins.x]\ndisabled_plugins = [\"cri\"]\n"));
  EXPECT_FALSE(containerd_cri_disabled("version = 2\n"));
}

// A host root in a temporary folder, for the files a test lays out (sockets as plain files: only
// their existence is read).
struct TempRoot {
  TempRoot() {
    char tmpl[] = "/tmp/gpud-containerd-root-XXXXXX";
    if (::mkdtemp(tmpl) != nullptr) dir = tmpl;
  }
  ~TempRoot() {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
  void touch(const std::string& path) const {
    std::filesystem::create_directories(std::filesystem::path(dir + path).parent_path());
    std::ofstream(dir + path) << "";
  }
  std::string dir;
};

TEST(ContainerdLayouts, ContainerdsOwnPathsFirstThenK3sThenRke2) {
  TempRoot root;
  host::HostFs fs(root.dir);
  EXPECT_EQ(find_containerd_layout(fs).distribution, "containerd");
  root.touch("/var/lib/rancher/rke2/agent/etc/containerd/config.toml");
  EXPECT_EQ(find_containerd_layout(fs).distribution, "rke2");
  // rke2's containerd binds k3s's socket path: the config says whose it is.
  root.touch("/run/k3s/containerd/containerd.sock");
  EXPECT_EQ(find_containerd_layout(fs).distribution, "rke2");
  EXPECT_EQ(find_containerd_layout(fs).socket, "/run/k3s/containerd/containerd.sock");
  root.touch("/var/lib/rancher/k3s/agent/etc/containerd/config.toml");
  EXPECT_EQ(find_containerd_layout(fs).distribution, "k3s");
  // containerd's own socket without its config: a socket and a config together come first.
  root.touch("/run/containerd/containerd.sock");
  EXPECT_EQ(find_containerd_layout(fs).distribution, "k3s");
  root.touch("/etc/containerd/config.toml");
  EXPECT_EQ(find_containerd_layout(fs).distribution, "containerd");
}

TEST(ContainerdRule, CdiEnabledWithoutASpecOrK3sWithoutTheRuntimeIsUnhealthyWithoutAToolkitPod) {
  ContainerdSnapshot s = running();
  s.nvidia_gpus = true;
  ContainerdNvidiaRuntime rt = runtime_config(false);
  rt.cdi_enabled_in =
      "/etc/containerd/config.toml: [plugins.\"io.containerd.grpc.v1.cri\"] enable_cdi = true";
  rt.errors = {
      "/etc/containerd/config.toml enables CDI, but no nvidia.com/gpu CDI spec is in /etc/cdi or "
      "/var/run/cdi"};
  s.nvidia_runtime = Result<ContainerdNvidiaRuntime>(rt);
  CheckResult r = evaluate_containerd(s);
  EXPECT_EQ(r.health(), Health::kUnhealthy);
  EXPECT_EQ(
      r.states[0].reason,
      "/etc/containerd/config.toml enables CDI, but no nvidia.com/gpu CDI spec is in /etc/cdi "
      "or /var/run/cdi, and no nvidia runtime is configured; containerd is running (1 pod "
      "sandboxes, 1 containers); nvidia-container-toolkit pod not found");
  // Docker's containerd (the CRI plugin disabled) serves no Kubernetes: not judged.
  rt.cri_disabled = true;
  s.nvidia_runtime = Result<ContainerdNvidiaRuntime>(rt);
  EXPECT_EQ(evaluate_containerd(s).health(), Health::kHealthy);
  // No GPUs: not judged.
  rt.cri_disabled = false;
  s.nvidia_runtime = Result<ContainerdNvidiaRuntime>(rt);
  s.nvidia_gpus = false;
  EXPECT_EQ(evaluate_containerd(s).health(), Health::kHealthy);

  // Plain containerd without the nvidia runtime and without CDI: judged only with a toolkit pod.
  s = running();
  s.nvidia_gpus = true;
  s.nvidia_runtime = Result<ContainerdNvidiaRuntime>(runtime_config(false));
  EXPECT_EQ(evaluate_containerd(s).health(), Health::kHealthy);
  // k3s: its generated config has the nvidia runtime wherever the toolkit is installed.
  s.distribution = "k3s";
  s.config_path = "/var/lib/rancher/k3s/agent/etc/containerd/config.toml";
  r = evaluate_containerd(s);
  EXPECT_EQ(r.health(), Health::kUnhealthy);
  EXPECT_EQ(r.states[0].reason,
            "k3s's containerd config /var/lib/rancher/k3s/agent/etc/containerd/config.toml "
            "configures no nvidia runtime (k3s adds it when it finds the NVIDIA container "
            "toolkit); containerd is running (1 pod sandboxes, 1 containers); "
            "nvidia-container-toolkit pod not found");
  // containerd down is the reading, the config is not added to it.
  s.service = Result<host::UnitState>(unit("inactive", "dead"));
  r = evaluate_containerd(s);
  EXPECT_EQ(r.health(), Health::kUnhealthy);
  EXPECT_EQ(r.states[0].reason, "containerd service is inactive (dead)");
}

TEST(UnixSocketOwner, InodesOfAPathInProcNetUnix) {
  const std::string table =
      "Num       RefCount Protocol Flags    Type St Inode Path\n"
      "0000000000000000: 00000002 00000000 00010000 0001 01 31337 /run/containerd/containerd.sock\n"
      "0000000000000000: 00000003 00000000 00000000 0001 03 31400 /run/containerd/containerd.sock\n"
      "0000000000000000: 00000002 00000000 00010000 0001 01 31338 "
      "/run/containerd/containerd.sock.ttrpc\n"
      "0000000000000000: 00000003 00000000 00000000 0001 03 4242\n"
      "0000000000000000: 00000002 00000000 00010000 0001 01 777 /tmp/with space.sock\n";
  EXPECT_EQ(host::unix_socket_inodes(table, "/run/containerd/containerd.sock"),
            (std::vector<uint64_t>{31337, 31400}));
  EXPECT_EQ(host::unix_socket_inodes(table, "/tmp/with space.sock"), (std::vector<uint64_t>{777}));
  EXPECT_TRUE(host::unix_socket_inodes(table, "/run/docker.sock").empty());
}

struct Harness {
  Harness() {
    bin.script("containerd", "exit 0");
    config.executable_search_path = bin.dir();
    config.host_root = fixture("containerd/host-missing-config");  // no systemd, no sockets
    ctx.config = &config;
    ctx.containers = &directory;
    ctx.container_source = &source;
  }
  testing_support::FakeCommands bin;
  Config config;
  runtimes::ContainerDirectory directory;
  runtimes::ContainerSource source{directory};
  ComponentContext ctx;
};

TEST(ContainerdComponent, NotApplicableWithoutContainerd) {
  Config config;
  config.executable_search_path = "/nonexistent";
  config.host_root = fixture("containerd/host-missing-config");  // no binary, no socket
  ComponentContext ctx;
  ctx.config = &config;
  EXPECT_FALSE(ContainerdComponent(ctx).supported());
}

// gpud in a container: no containerd on its own search path, the host's under --host-root.
TEST(ContainerdComponent, InstalledOnTheHostOrItsSocketExists) {
  char tmpl[] = "/tmp/gpud-containerd-host-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string root = tmpl;
  Config config;
  config.executable_search_path = "/nonexistent";
  config.host_root = root;
  ComponentContext ctx;
  ctx.config = &config;
  EXPECT_FALSE(ContainerdComponent(ctx).supported());
  std::filesystem::create_directories(root + "/usr/bin");
  std::ofstream(root + "/usr/bin/containerd") << "#!/bin/sh\n";
  EXPECT_TRUE(ContainerdComponent(ctx).supported());
  std::filesystem::remove(root + "/usr/bin/containerd");
  std::filesystem::create_directories(root + "/run/containerd");
  std::ofstream(root + "/run/containerd/containerd.sock") << "";
  EXPECT_TRUE(ContainerdComponent(ctx).supported());
  std::filesystem::remove_all(root);
}

TEST(ContainerdComponent, AMissingSocketTurnsUnhealthyAtTheFifthCheckAndClearsItsContainers) {
  Harness h;
  h.directory.publish("containerd", {{std::string(64, 'a'), "main", "p", "ns", "u", "containerd"}});
  ContainerdComponent c(h.ctx);
  ASSERT_TRUE(c.supported());
  for (int n = 1; n <= 4; ++n) {
    CheckResult r = c.check();
    EXPECT_EQ(r.health(), Health::kHealthy) << n << ": " << r.summary();
  }
  EXPECT_TRUE(h.directory.all().empty());
  CheckResult r = c.check();
  EXPECT_EQ(r.health(), Health::kUnhealthy);
  EXPECT_EQ(r.states[0].reason,
            "containerd socket " + fixture("containerd/host-missing-config") +
                "/run/containerd/containerd.sock not found in 5 consecutive checks");
}

// gpud in a container on a k3s, rke2 or CDI node whose containerd socket is not (yet) there: the
// config is read from the host root and judged all the same; the socket's count goes on.
struct NodeHarness {
  explicit NodeHarness(const std::string& root, bool gpus = true) {
    config.executable_search_path = "/nonexistent";
    config.host_root = root;
    ctx.config = &config;
    ctx.nvidia_pci_present = gpus;
  }
  Config config;
  ComponentContext ctx;
};

nlohmann::json data_of(const CheckResult& r) { return r.states[0].data; }

TEST(ContainerdComponent, K3sAndRke2NodesAreFoundByTheirConfigAndReadThroughIt) {
  const std::string root = fixture("containerd/host-k3s");
  NodeHarness k3s(root);
  ContainerdComponent c(k3s.ctx);
  ASSERT_TRUE(c.supported()) << "k3s's config is a sign of its containerd";
  CheckResult r = c.check();
  EXPECT_EQ(r.health(), Health::kHealthy) << r.summary();
  EXPECT_EQ(r.states[0].reason, "containerd socket " + root +
                                    "/run/k3s/containerd/containerd.sock not found (1 of 5 "
                                    "checks)");
  nlohmann::json d = data_of(r);
  EXPECT_EQ(d["distribution"], "k3s");
  EXPECT_EQ(d["config"], "/var/lib/rancher/k3s/agent/etc/containerd/config.toml");
  EXPECT_EQ(d["nvidia_runtime"],
            "/var/lib/rancher/k3s/agent/etc/containerd/config.toml: "
            "[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.nvidia]");

  NodeHarness rke2(fixture("containerd/host-rke2"));
  r = ContainerdComponent(rke2.ctx).check();
  EXPECT_EQ(r.health(), Health::kHealthy) << r.summary();
  EXPECT_EQ(data_of(r)["distribution"], "rke2");
  EXPECT_EQ(data_of(r)["socket"],
            fixture("containerd/host-rke2") + "/run/k3s/containerd/containerd.sock");

  NodeHarness missing(fixture("containerd/host-k3s-no-nvidia"));
  r = ContainerdComponent(missing.ctx).check();
  EXPECT_EQ(r.health(), Health::kUnhealthy);
  EXPECT_EQ(r.states[0].reason.rfind("k3s's containerd config "
                                     "/var/lib/rancher/k3s/agent/etc/containerd/config.toml "
                                     "configures no nvidia runtime",
                                     0),
            0u)
      << r.states[0].reason;
  // Without NVIDIA GPUs the runtime is not wanted.
  NodeHarness no_gpus(fixture("containerd/host-k3s-no-nvidia"), false);
  EXPECT_EQ(ContainerdComponent(no_gpus.ctx).check().health(), Health::kHealthy);
}

TEST(ContainerdComponent, NativeCdiIsReadWithoutAToolkitPodAndCdiWithoutTheSpecIsFound) {
  testing_support::FakeCommands bin;
  bin.script("containerd", "exit 0");
  NodeHarness cdi(fixture("containerd/host-native-cdi"));
  cdi.config.executable_search_path = bin.dir();
  CheckResult r = ContainerdComponent(cdi.ctx).check();
  EXPECT_EQ(r.health(), Health::kHealthy) << r.summary();
  EXPECT_EQ(data_of(r)["nvidia_cdi_spec"], "/var/run/cdi/nvidia.yaml");

  NodeHarness no_spec(fixture("containerd/host-cdi-no-nvidia-spec"));
  no_spec.config.executable_search_path = bin.dir();
  r = ContainerdComponent(no_spec.ctx).check();
  EXPECT_EQ(r.health(), Health::kUnhealthy);
  EXPECT_EQ(r.states[0].reason.rfind("/etc/containerd/config.toml enables CDI, but no "
                                     "nvidia.com/gpu CDI spec is in /etc/cdi or /var/run/cdi, and "
                                     "no nvidia runtime is configured; containerd socket ",
                                     0),
            0u)
      << r.states[0].reason;
}

}  // namespace
}  // namespace gpud::components
