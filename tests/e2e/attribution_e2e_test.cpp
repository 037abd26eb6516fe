// End-to-end fault attribution: a real process of this test is "the GPU process" (the fake NVML
// puts its pid on GPU 3) and the pid of an Xid line; a host-root fixture gives it the cgroup of a
// Kubernetes container, and a local stand-in for the kubelet's read-only port serves
// testing/fixtures/kubelet/pods.json, which lists that container. `gpud scan` and the daemon must
// name its pod.
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "tests/e2e/daemon_process.h"

namespace gpud::e2e {
namespace {

using namespace std::chrono_literals;

constexpr const char* kTrainerId =
    "4f1d2c3b4a5968778695a4b3c2d1e0f00112233445566778899aabbccddeeff0";
constexpr const char* kXid = "accelerator-nvidia-error-xid";

std::string source_file(const std::string& rel) {
  return read_file(std::string(GPUD_SOURCE_DIR) + "/" + rel);
}

// The kubelet's read-only port, on a free port of 127.0.0.1; it answers after `delay`.
class FakeKubelet {
 public:
  explicit FakeKubelet(std::chrono::milliseconds delay = 0ms) {
    server_.Get("/pods", [delay](const httplib::Request&, httplib::Response& res) {
      std::this_thread::sleep_for(delay);
      res.set_content(source_file("testing/fixtures/kubelet/pods.json"), "application/json");
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    for (int i = 0; i < 500 && !server_.is_running(); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ~FakeKubelet() {
    server_.stop();
    thread_.join();
  }
  int port() const { return port_; }

 private:
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
};

// A child that sleeps until killed: the workload.
class Workload {
 public:
  Workload() {
    pid_ = fork();
    if (pid_ == 0) {
      execl("/bin/sleep", "sleep", "120", static_cast<char*>(nullptr));
      _exit(127);
    }
  }
  ~Workload() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
};

// A host root whose /proc/<pid> says the workload runs in the trainer container of the pod
// ml/llm-train-0 (its real stat, so its start time is real), and that has a kubelet.
std::string make_host_root(const std::string& dir, pid_t pid) {
  const std::string root = dir + "/host";
  const std::string proc = root + "/proc/" + std::to_string(pid);
  std::filesystem::create_directories(proc);
  std::filesystem::create_directories(root + "/var/lib/kubelet");
  std::ofstream(proc + "/cgroup")
      << "0::/kubepods.slice/kubepods-burstable.slice/"
      << "kubepods-burstable-pod0d8a4c1e_7b2f_4c3d_9e8f_1a2b3c4d5e6f.slice/cri-containerd-"
      << kTrainerId << ".scope\n";
  std::ofstream(proc + "/stat") << read_file("/proc/" + std::to_string(pid) + "/stat");
  std::ofstream(proc + "/cmdline") << std::string("python3\0train.py\0", 17);
  std::ofstream(proc + "/environ") << std::string("PATH=/usr/bin\0", 14);
  return root;
}

// A fake NVML scenario of eight GPUs whose GPU 3 runs `pid`; its path.
std::string write_scenario(const std::string& dir, pid_t pid) {
  const std::string scenario = dir + "/scenario.json";
  std::ofstream(scenario) << R"({"count": 8, "gpus": {"3": {"processes": [{"pid": )" << pid
                          << R"(, "used_memory_bytes": 1073741824}]}}})";
  return scenario;
}

// The extra_info of the daemon's Xid event with that code; null while there is none.
nlohmann::json xid_event_extra(const DaemonProcess& d, int xid) {
  auto res = d.get(std::string("/v1/events?components=") + kXid);
  if (!res || res->status != 200) return nullptr;
  for (const auto& c : parse_json(res->body))
    for (const auto& e : c.value("events", nlohmann::json::array()))
      if (e.contains("extra_info") && e["extra_info"].value("xid", 0) == xid)
        return e["extra_info"];
  return nullptr;
}

TEST(AttributionE2E, ScanShowsTheGpuProcessesPod) {
  std::string dir = make_temp_dir();
  TempDirGuard guard{dir};
  Workload w;
  ASSERT_GT(w.pid(), 0);
  const std::string root = make_host_root(dir, w.pid());
  FakeKubelet kubelet;
  const std::string scenario = write_scenario(dir, w.pid());
  ::setenv("FAKE_NVML_SCENARIO", scenario.c_str(), 1);
  const std::vector<std::string> args = {"scan",
                                         "--nvml-lib",
                                         GPUD_FAKE_NVML,
                                         "--host-root",
                                         root,
                                         "--components",
                                         "accelerator-nvidia-processes,kubelet",
                                         "--kubelet-read-only-port",
                                         std::to_string(kubelet.port()),
                                         "--kubelet-port",
                                         "0",
                                         "--log-level",
                                         "error"};
  auto text = run_gpud(args, 60);
  auto args_json = args;
  args_json.push_back("--json");
  auto json = run_gpud(args_json, 60);
  ::unsetenv("FAKE_NVML_SCENARIO");
  EXPECT_NE(text.out.find("1 GPU compute process(es) running in ml/llm-train-0/trainer"),
            std::string::npos)
      << text.out;

  auto doc = parse_json(json.out);
  nlohmann::json proc;
  for (const auto& c : doc.value("components", nlohmann::json::array())) {
    if (c.value("component", "") == "kubelet") {
      EXPECT_EQ(c["states"][0]["health"], "Healthy") << c.dump();
    }
    if (c.value("component", "") != "accelerator-nvidia-processes") continue;
    auto data = parse_json(c["states"][0]["extra_info"].value("data", "{}"));
    for (const auto& gpu : data.value("gpus", nlohmann::json::array()))
      for (const auto& p : gpu.value("processes", nlohmann::json::array()))
        if (p.value("pid", 0) == w.pid()) proc = p;
  }
  ASSERT_FALSE(proc.is_null()) << json.out;
  EXPECT_EQ(proc["pod"], "llm-train-0") << proc.dump();
  EXPECT_EQ(proc["namespace"], "ml");
  EXPECT_EQ(proc["container"], "trainer");
  EXPECT_EQ(proc["container_id"], kTrainerId);
  EXPECT_EQ(proc["pod_uid"], "0d8a4c1e-7b2f-4c3d-9e8f-1a2b3c4d5e6f");
  EXPECT_EQ(proc["attribution_source"], "kubelet");
}

TEST(AttributionE2E, XidEventOfTheDaemonNamesItsPod) {
  std::string dir = make_temp_dir();
  TempDirGuard guard{dir};
  Workload w;
  ASSERT_GT(w.pid(), 0);
  const std::string root = make_host_root(dir, w.pid());
  FakeKubelet kubelet;
  const std::string kmsg = dir + "/kmsg";
  double uptime_s = 0;
  std::ifstream("/proc/uptime") >> uptime_s;
  std::ofstream(kmsg) << "6,1," << static_cast<long>(uptime_s * 1e6) - 1000000
                      << ",-;Linux version 6.1.0 (test)\n";
  DaemonProcess d(
      dir + "/data",
      {"--host-root", root, "--components", std::string(kXid) + ",kubelet",
       "--kubelet-read-only-port", std::to_string(kubelet.port()), "--kubelet-port", "0"},
      false, {"GPUD_KMSG_PATH=" + kmsg});
  ASSERT_TRUE(d.ready()) << d.log();
  // The kubelet's first listing, then the Xid line (the follower reads what is appended).
  ASSERT_TRUE(eventually(
      [&] { return component_state(d, "kubelet").value("health", "") == "Healthy"; }, 10s))
      << component_state(d, "kubelet").dump() << d.log();
  std::ifstream("/proc/uptime") >> uptime_s;
  std::ofstream(kmsg, std::ios::app)
      << "4,2," << static_cast<long>(uptime_s * 1e6)
      << ",-;NVRM: Xid (PCI:0000:3a:00): 13, pid=" << w.pid()
      << ", name=python3, Graphics SM Warp Exception on (GPC 0, TPC 0, SM 0)\n";
  nlohmann::json extra;
  ASSERT_TRUE(eventually([&] { return !(extra = xid_event_extra(d, 13)).is_null(); }, 10s))
      << d.log();
  EXPECT_EQ(extra["pid"], w.pid());
  EXPECT_EQ(extra["pod"], "llm-train-0") << extra.dump();
  EXPECT_EQ(extra["namespace"], "ml");
  EXPECT_EQ(extra["container"], "trainer");
  EXPECT_EQ(extra["container_id"], kTrainerId);
  EXPECT_EQ(extra["attribution_source"], "kubelet");
  d.stop();
}

// The daemon lists the containers before its other first checks and before it reads the kernel
// log: with a kubelet slow to answer, the first processes state and the Xid line the ring already
// held at start name the pod, not only a later check.
TEST(AttributionE2E, DaemonTracesFromItsFirstCheck) {
  std::string dir = make_temp_dir();
  TempDirGuard guard{dir};
  Workload w;
  ASSERT_GT(w.pid(), 0);
  const std::string root = make_host_root(dir, w.pid());
  FakeKubelet kubelet(700ms);
  const std::string scenario = write_scenario(dir, w.pid());
  const std::string kmsg = dir + "/kmsg";
  std::this_thread::sleep_for(20ms);  // the line comes after the workload started
  double uptime_s = 0;
  std::ifstream("/proc/uptime") >> uptime_s;
  std::ofstream(kmsg) << "6,1," << static_cast<long>(uptime_s * 1e6) - 60000000
                      << ",-;Linux version 6.1.0 (test)\n"
                      << "4,2," << static_cast<long>(uptime_s * 1e6)
                      << ",-;NVRM: Xid (PCI:0000:3a:00): 13, pid=" << w.pid()
                      << ", name=python3, Graphics SM Warp Exception on (GPC 0, TPC 0, SM 0)\n";
  DaemonProcess d(
      dir + "/data",
      {"--host-root", root, "--nvml-lib", GPUD_FAKE_NVML, "--components",
       std::string(kXid) + ",accelerator-nvidia-processes,kubelet", "--kubelet-read-only-port",
       std::to_string(kubelet.port()), "--kubelet-port", "0"},
      false, {"GPUD_KMSG_PATH=" + kmsg, "FAKE_NVML_SCENARIO=" + scenario});
  ASSERT_TRUE(d.ready()) << d.log();
  nlohmann::json first;
  ASSERT_TRUE(eventually(
      [&] {
        first = component_state(d, "accelerator-nvidia-processes");
        return !first.empty() && first.value("health", "") != "Initializing";
      },
      20s))
      << first.dump() << d.log();
  EXPECT_NE(first.value("reason", "").find("in ml/llm-train-0/trainer"), std::string::npos)
      << first.dump();
  nlohmann::json extra;
  ASSERT_TRUE(eventually([&] { return !(extra = xid_event_extra(d, 13)).is_null(); }, 10s))
      << d.log();
  EXPECT_EQ(extra["pod"], "llm-train-0") << extra.dump();
  EXPECT_EQ(extra["attribution_source"], "kubelet");
  d.stop();
}

}  // namespace
}  // namespace gpud::e2e
