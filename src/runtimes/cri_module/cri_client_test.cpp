// libgpud-cri.so through runtimes::CriClient (the dlopen path gpud takes) against small gRPC
// servers (gpud_cri_fake_server, a process of its own) on private unix sockets: the pod-resources
// List, a CRI runtime that lists canned sandboxes, a daemon without the CRI service, a socket
// nobody listens on, and a server that never answers. The same through `gpud cri-helper` (the
// daemon's way: the calls in a child process).
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "components/containers/kubelet.h"
#include "core/config.h"
#include "host/command.h"
#include "runtimes/container_directory.h"
#include "runtimes/container_source.h"
#include "runtimes/cri.h"

extern char** environ;

namespace gpud::runtimes {
namespace {

using namespace std::chrono_literals;

struct TempDir {
  TempDir() {
    std::string t = (std::filesystem::temp_directory_path() / "gpud-cri-XXXXXX").string();
    if (::mkdtemp(t.data()) != nullptr) path = t;
  }
  ~TempDir() {
    std::error_code ec;
    if (!path.empty()) std::filesystem::remove_all(path, ec);
  }
  std::string path;
};

// The fake server (fake_cri_server.cpp) in MODE on <dir>/server.sock, killed at scope exit.
struct Server {
  Server(const std::string& dir, const std::string& mode) {
    socket = dir + "/server.sock";
    const char* argv[] = {GPUD_CRI_FAKE_SERVER, mode.c_str(), socket.c_str(), nullptr};
    if (posix_spawn(&pid, GPUD_CRI_FAKE_SERVER, nullptr, nullptr, const_cast<char**>(argv),
                    environ) != 0)
      pid = 0;
    const auto until = std::chrono::steady_clock::now() + 10s;
    while (pid > 0 && !std::filesystem::exists(socket) && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(20ms);
  }
  ~Server() {
    if (pid > 0) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
  }
  bool up() const { return pid > 0 && std::filesystem::exists(socket); }
  std::string socket;
  pid_t pid = 0;
};

TEST(CriModule, PodResourcesListOfATinyServer) {
  TempDir dir;
  Server srv(dir.path, "pod-resources");
  ASSERT_TRUE(srv.up());
  auto pods = CriClient().list_pod_resources(srv.socket, 5s);
  ASSERT_TRUE(pods) << pods.error().message;
  ASSERT_EQ(pods->size(), 2u);
  const PodResources& p = (*pods)[0];
  EXPECT_EQ(p.name, "trainer-0");
  EXPECT_EQ(p.pod_namespace, "ml");
  ASSERT_EQ(p.containers.size(), 2u);
  EXPECT_EQ(p.containers[0].name, "main");
  ASSERT_EQ(p.containers[0].devices.size(), 1u);
  EXPECT_EQ(p.containers[0].devices[0].resource_name, "nvidia.com/gpu");
  EXPECT_EQ(p.containers[0].devices[0].device_ids,
            (std::vector<std::string>{"GPU-0b0e7a52-3c3a-5a1e-9d1c-9a1f7c2f0003",
                                      "GPU-0b0e7a52-3c3a-5a1e-9d1c-9a1f7c2f0005"}));
  EXPECT_EQ(p.containers[1].name, "sidecar");
  EXPECT_TRUE(p.containers[1].devices.empty());
  EXPECT_EQ((*pods)[1].name, "idle");
  EXPECT_TRUE((*pods)[1].containers.empty());
}

TEST(CriModule, ListsSandboxesAndContainersOfACriRuntime) {
  TempDir dir;
  Server srv(dir.path, "runtime");
  ASSERT_TRUE(srv.up());
  CriClient cri;
  auto v = cri.version(srv.socket, 5s);
  ASSERT_TRUE(v) << v.error().message;
  EXPECT_EQ(v->runtime_name, "fake-cri");
  EXPECT_EQ(v->runtime_version, "9.9.9");
  EXPECT_EQ(v->runtime_api_version, "v1");
  auto pods = cri.list_pods(srv.socket, 5s);
  ASSERT_TRUE(pods) << pods.error().message;
  ASSERT_EQ(pods->sandboxes.size(), 1u);
  const CriSandbox& s = pods->sandboxes[0];
  EXPECT_EQ(s.id, "5f1c0b7e2a9d");
  EXPECT_EQ(s.name, "nvidia-container-toolkit-daemonset-x7k2p");
  EXPECT_EQ(s.pod_namespace, "gpu-operator");
  EXPECT_EQ(s.uid, "8d2e-uid");
  EXPECT_EQ(s.attempt, 2u);
  EXPECT_EQ(s.state, "SANDBOX_NOTREADY");
  EXPECT_FALSE(s.ready());
  EXPECT_EQ(s.runtime_handler, "nvidia");
  EXPECT_EQ(
      std::chrono::duration_cast<std::chrono::nanoseconds>(s.created.time_since_epoch()).count(),
      1'700'000'000'123'456'789);
  ASSERT_EQ(pods->containers.size(), 1u);
  const CriContainer& c = pods->containers[0];
  EXPECT_EQ(c.name, "toolkit");
  EXPECT_EQ(c.sandbox_id, "5f1c0b7e2a9d");
  EXPECT_EQ(c.state, "CONTAINER_RUNNING");
  EXPECT_EQ(c.attempt, 1u);
  EXPECT_EQ(c.image, "nvcr.io/nvidia/k8s/container-toolkit:v1.17.0");
}

TEST(CriModule, ListPodSandboxErrorIsTheReplysError) {
  TempDir dir;
  Server srv(dir.path, "runtime-failing");
  ASSERT_TRUE(srv.up());
  auto pods = CriClient().list_pods(srv.socket, 5s);
  ASSERT_FALSE(pods);
  EXPECT_EQ(pods.error().code, GPUD_CRI_INTERNAL);
  EXPECT_EQ(pods.error().message, "ListPodSandbox: sandbox store is corrupt");
}

TEST(CriModule, ADaemonWithoutTheCriServiceIsUnimplemented) {
  TempDir dir;
  Server srv(dir.path, "pod-resources");  // answers gRPC, but has no runtime.v1.RuntimeService
  ASSERT_TRUE(srv.up());
  auto pods = CriClient().list_pods(srv.socket, 5s);
  ASSERT_FALSE(pods);
  EXPECT_EQ(pods.error().code, GPUD_CRI_UNIMPLEMENTED) << pods.error().message;
  EXPECT_NE(pods.error().message.find("ListPodSandbox"), std::string::npos);
}

// A socket nobody listens on (left behind by a runtime that died, or missing) is Unavailable at the
// first refused attempt, not after the call's whole timeout.
TEST(CriModule, NothingListeningIsUnavailableWithoutWaitingOutTheTimeout) {
  TempDir dir;
  // A socket file left behind by a daemon that is gone: connect() is refused.
  const std::string stale = dir.path + "/stale.sock";
  int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", stale.c_str());
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ::close(fd);
  for (const std::string& sock : {stale, dir.path + "/missing.sock"}) {
    const auto start = std::chrono::steady_clock::now();
    auto pods = CriClient().list_pods(sock, 8s);
    const auto took = std::chrono::steady_clock::now() - start;
    ASSERT_FALSE(pods) << sock;
    EXPECT_EQ(pods.error().code, GPUD_CRI_UNAVAILABLE) << pods.error().message;
    EXPECT_NE(pods.error().message.find("cannot connect to unix:" + sock), std::string::npos)
        << pods.error().message;
    EXPECT_LT(took, 3s) << "waited for a runtime nobody runs";
  }
}

TEST(CriModule, AServerThatNeverAnswersCostsTheDeadline) {
  TempDir dir;
  Server srv(dir.path, "pod-resources-slow");
  ASSERT_TRUE(srv.up());
  const auto start = std::chrono::steady_clock::now();
  auto pods = CriClient().list_pod_resources(srv.socket, 300ms);
  const auto took = std::chrono::steady_clock::now() - start;
  ASSERT_FALSE(pods);
  EXPECT_EQ(pods.error().code, GPUD_CRI_DEADLINE_EXCEEDED) << pods.error().message;
  EXPECT_LT(took, 3s);
}

// `gpud cri-helper`, run as the daemon runs it: the same answers and errors as the module in this
// process.
CriClient helper_client() { return CriClient(CriHelper{GPUD_BINARY}); }

TEST(CriHelperProcess, ListsWhatTheModuleListsInProcess) {
  TempDir dir;
  Server srv(dir.path, "runtime");
  ASSERT_TRUE(srv.up());
  CriClient helper = helper_client();
  auto v = helper.version(srv.socket, 5s);
  ASSERT_TRUE(v) << v.error().message;
  EXPECT_EQ(v->runtime_name, "fake-cri");
  auto pods = helper.list_pods(srv.socket, 5s);
  ASSERT_TRUE(pods) << pods.error().message;
  auto here = CriClient().list_pods(srv.socket, 5s);
  ASSERT_TRUE(here) << here.error().message;
  ASSERT_EQ(pods->sandboxes.size(), 1u);
  ASSERT_EQ(here->sandboxes.size(), 1u);
  EXPECT_EQ(pods->sandboxes[0].id, here->sandboxes[0].id);
  EXPECT_EQ(pods->sandboxes[0].name, "nvidia-container-toolkit-daemonset-x7k2p");
  EXPECT_EQ(pods->sandboxes[0].created, here->sandboxes[0].created);
  ASSERT_EQ(pods->containers.size(), 1u);
  EXPECT_EQ(pods->containers[0].image, "nvcr.io/nvidia/k8s/container-toolkit:v1.17.0");
}

TEST(CriHelperProcess, PodResourcesThroughTheHelper) {
  TempDir dir;
  Server srv(dir.path, "pod-resources");
  ASSERT_TRUE(srv.up());
  auto pods = helper_client().list_pod_resources(srv.socket, 5s);
  ASSERT_TRUE(pods) << pods.error().message;
  ASSERT_EQ(pods->size(), 2u);
  EXPECT_EQ((*pods)[0].name, "trainer-0");
  ASSERT_EQ((*pods)[0].containers.size(), 2u);
  EXPECT_EQ((*pods)[0].containers[0].devices[0].device_ids.size(), 2u);
  // This server has no CRI runtime service: the module's code comes back through the helper.
  auto runtime = helper_client().list_pods(srv.socket, 5s);
  ASSERT_FALSE(runtime);
  EXPECT_EQ(runtime.error().code, GPUD_CRI_UNIMPLEMENTED) << runtime.error().message;
}

TEST(CriHelperProcess, ErrorsKeepTheirCodesAndWords) {
  TempDir dir;
  Server failing(dir.path, "runtime-failing");
  ASSERT_TRUE(failing.up());
  auto pods = helper_client().list_pods(failing.socket, 5s);
  ASSERT_FALSE(pods);
  EXPECT_EQ(pods.error().code, GPUD_CRI_INTERNAL);
  EXPECT_EQ(pods.error().message, "ListPodSandbox: sandbox store is corrupt");
  // No socket at all.
  const std::string missing = dir.path + "/missing.sock";
  const auto start = std::chrono::steady_clock::now();
  auto none = helper_client().list_pods(missing, 500ms);
  ASSERT_FALSE(none);
  EXPECT_EQ(none.error().code, GPUD_CRI_UNAVAILABLE) << none.error().message;
  EXPECT_NE(none.error().message.find("cannot connect to unix:" + missing), std::string::npos)
      << none.error().message;
  EXPECT_LT(std::chrono::steady_clock::now() - start, 4s);
}

TEST(CriHelperProcess, AServerThatNeverAnswersCostsTheCallsDeadline) {
  TempDir dir;
  Server srv(dir.path, "pod-resources-slow");
  ASSERT_TRUE(srv.up());
  auto pods = helper_client().list_pod_resources(srv.socket, 300ms);
  ASSERT_FALSE(pods);
  // The helper's own gRPC deadline, reported by the helper; not the daemon killing it.
  EXPECT_EQ(pods.error().code, GPUD_CRI_DEADLINE_EXCEEDED) << pods.error().message;
  EXPECT_EQ(pods.error().message.find("CRI helper timed out"), std::string::npos)
      << pods.error().message;
}

TEST(CriHelperProcess, UnknownCallsAndMissingFlagsAreUsageErrors) {
  auto r = host::run_command({GPUD_BINARY, "cri-helper", "run-pod-sandbox", "--socket", "/x"},
                             host::kDefaultSearchPath, 10s);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->exit_code, 2);
  EXPECT_NE(r->err.find("unknown call \"run-pod-sandbox\""), std::string::npos) << r->err;
  EXPECT_TRUE(r->out.empty());
  r = host::run_command({GPUD_BINARY, "cri-helper", "list-pods"}, host::kDefaultSearchPath, 10s);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_NE(r->exit_code, 0);
  EXPECT_TRUE(r->out.empty());
}

// The kubelet component reads the pod-resources socket under the host root and maps each GPU to
// the container the kubelet allocated it to; a socket that does not answer is Degraded.
class KubeletPodResources : public ::testing::TestWithParam<bool> {};

TEST_P(KubeletPodResources, MapsGpusToPods) {
  TempDir dir;
  Server srv(dir.path, "pod-resources");
  ASSERT_TRUE(srv.up());
  const std::string root = dir.path + "/host";
  std::filesystem::create_directories(root + "/var/lib/kubelet/pod-resources");
  std::filesystem::create_symlink(srv.socket, root + "/var/lib/kubelet/pod-resources/kubelet.sock");
  Config config;
  config.host_root = root;
  config.kubelet_read_only_port = 0;  // no kubelet API here: only pod-resources
  config.kubelet_port = 0;
  if (GetParam()) config.cri_helper = GPUD_BINARY;
  ContainerDirectory directory;
  ContainerSource source(directory, CriHelper{config.cri_helper});
  components::ComponentContext ctx;
  ctx.config = &config;
  ctx.containers = &directory;
  ctx.container_source = &source;
  components::KubeletComponent kubelet(ctx);
  ASSERT_TRUE(kubelet.supported());  // /var/lib/kubelet exists
  CheckResult r = kubelet.check();
  EXPECT_EQ(r.health(), Health::kHealthy) << r.summary();
  auto data = r.states[0].data;
  ASSERT_EQ(data["gpu_allocations"].size(), 1u) << data.dump();
  EXPECT_EQ(data["gpu_allocations"][0]["pod"], "trainer-0");
  EXPECT_EQ(data["gpu_allocations"][0]["device_ids"].size(), 2u);
  auto holder = directory.find_device("GPU-0b0e7a52-3c3a-5a1e-9d1c-9a1f7c2f0005");
  ASSERT_TRUE(holder);
  EXPECT_EQ(holder->pod_name, "trainer-0");
  EXPECT_EQ(holder->pod_namespace, "ml");
  EXPECT_EQ(holder->container, "main");
  EXPECT_EQ(holder->source, "pod-resources");

  // The kubelet gone, its socket left behind: Degraded with the reason, and the allocations
  // are no longer published as fresh.
  ::kill(srv.pid, SIGKILL);
  ::waitpid(srv.pid, nullptr, 0);
  srv.pid = 0;
  r = kubelet.check();
  EXPECT_EQ(r.health(), Health::kDegraded);
  EXPECT_NE(r.states[0].reason.find("kubelet pod-resources: "), std::string::npos)
      << r.states[0].reason;
  EXPECT_FALSE(directory.find_device("GPU-0b0e7a52-3c3a-5a1e-9d1c-9a1f7c2f0005"));
  // The socket removed: not asked, its devices forgotten.
  std::filesystem::remove(root + "/var/lib/kubelet/pod-resources/kubelet.sock");
  r = kubelet.check();
  EXPECT_EQ(r.health(), Health::kHealthy) << r.summary();
  EXPECT_FALSE(directory.find_device("GPU-0b0e7a52-3c3a-5a1e-9d1c-9a1f7c2f0005"));
}

INSTANTIATE_TEST_SUITE_P(InProcessAndHelper, KubeletPodResources, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "Helper" : "InProcess"; });

}  // namespace
}  // namespace gpud::runtimes
