// The containerd component and the CRI client against Debian's real containerd, started as root
// with a private config (root, state, socket and CNI folders under a temporary directory; the CRI
// plugin's sandbox image is the busybox image of testing/busybox-image, imported with ctr), and a
// pod sandbox in the node's network namespace (no CNI needed). Skips, saying why, where containerd
// cannot start: not root, a binary missing, no cgroups. The component makes its calls through
// `gpud cri-helper`, as in the daemon.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "components/containers/containerd.h"
#include "components/nvidia/xid.h"
#include "host/command.h"
#include "runtimes/attribution.h"
#include "runtimes/container_directory.h"
#include "runtimes/container_source.h"
#include "runtimes/cri.h"
#include "testing/fake_command.h"
#include "testing/xid_line.h"

extern char** environ;

namespace gpud {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

std::string search_path() {
  const char* p = std::getenv("PATH");
  return p != nullptr && *p != '\0' ? p : std::string(host::kDefaultSearchPath);
}

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void write_file(const std::string& path, const std::string& text) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path, std::ios::trunc) << text;
}

template <typename Pred>
bool eventually(Pred pred, std::chrono::milliseconds limit) {
  const auto until = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < until) {
    if (pred()) return true;
    std::this_thread::sleep_for(100ms);
  }
  return pred();
}

// The 64-hex-digit container id in /proc/<pid>/cgroup (cgroupfs or systemd driver), "" if none.
std::string container_id_of(int64_t pid) {
  static const std::regex kId("([0-9a-f]{64})");
  std::smatch m;
  std::string text = slurp("/proc/" + std::to_string(pid) + "/cgroup");
  return std::regex_search(text, m, kId) ? m[1].str() : std::string();
}

class ContainerdDaemon : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "containerd needs root; running as uid " << ::geteuid();
    for (const char* b : {"containerd", "ctr", "runc", "containerd-shim-runc-v2", "python3"})
      if (!host::find_executable(b, search_path()))
        GTEST_SKIP() << b << " is not on PATH (install containerd, runc and python3)";
    if (!fs::exists("/sys/fs/cgroup/cgroup.controllers") && !fs::exists("/sys/fs/cgroup/memory"))
      GTEST_SKIP() << "no cgroup v1 memory controller nor cgroup v2 under /sys/fs/cgroup";
    std::string t = "/tmp/gpud-ctrd-XXXXXX";
    ASSERT_NE(::mkdtemp(t.data()), nullptr);
    dir_ = t;
    socket_ = dir_ + "/containerd.sock";
    // The config the daemon runs with, also what the component reads as <host root>/etc/...
    config_text_ =
        "version = 2\n"
        "root = \"" +
        dir_ +
        "/root\"\n"
        "state = \"" +
        dir_ +
        "/state\"\n"
        "[grpc]\n  address = \"" +
        socket_ +
        "\"\n"
        "[ttrpc]\n  address = \"" +
        socket_ +
        ".ttrpc\"\n"
        "[debug]\n  address = \"\"\n"
        "[metrics]\n  address = \"\"\n"
        "[plugins.\"io.containerd.grpc.v1.cri\"]\n"
        "  sandbox_image = \"gpud-test/busybox:1\"\n"
        // The sandbox asks for oom_score_adj -998, which needs CAP_SYS_RESOURCE: a root without
        // it (this VM, some containers) would fail every RunPodSandbox.
        "  restrict_oom_score_adj = true\n"
        "  [plugins.\"io.containerd.grpc.v1.cri\".containerd]\n"
        "    snapshotter = \"overlayfs\"\n"
        "    default_runtime_name = \"runc\"\n"
        "  [plugins.\"io.containerd.grpc.v1.cri\".cni]\n"
        "    bin_dir = \"" +
        dir_ +
        "/cni/bin\"\n"
        "    conf_dir = \"" +
        dir_ + "/cni/conf\"\n";
    write_file(dir_ + "/config.toml", config_text_);
    // The component's host root: the real /proc (for the uptime of the containerd behind the
    // socket), systemd "running" (a fake systemctl answers), and the daemon's config.
    host_ = dir_ + "/host";
    fs::create_directories(host_ + "/run/systemd/system");
    fs::create_symlink("/proc", host_ + "/proc");
    write_file(host_ + "/etc/containerd/config.toml", config_text_);
    bin_.script("containerd", "exit 0");
    set_service("active", "running");

    ASSERT_NO_FATAL_FAILURE(start_daemon());
    const std::string image = dir_ + "/busybox.tar";
    auto made = host::run_command(
        {"python3", std::string(GPUD_SOURCE_DIR) + "/testing/busybox-image/make-image.py", image},
        search_path(), 30s);
    ASSERT_TRUE(made && made->exit_code == 0) << (made ? made->err : made.error().message);
    auto imported =
        host::run_command({"ctr", "--address", socket_, "-n", "k8s.io", "images", "import", image},
                          search_path(), 30s);
    ASSERT_TRUE(imported && imported->exit_code == 0)
        << (imported ? imported->out + imported->err : imported.error().message);

    config_.executable_search_path = bin_.dir();
    config_.systemctl_command = "systemctl";
    config_.host_root = host_;
    config_.containerd_socket = socket_;
    // The component lists through `gpud cri-helper`, as the daemon does (the fixture's own cri_
    // loads the module here to make and remove sandboxes).
    config_.cri_helper = GPUD_BINARY;
    ctx_.config = &config_;
    ctx_.containers = &directory_;
    source_.emplace(directory_, runtimes::CriHelper{config_.cri_helper});
    ctx_.container_source = &*source_;
  }

  void TearDown() override {
    if (dir_.empty()) return;
    if (daemon_ > 0) {
      for (const std::string& id : sandboxes_) {
        (void)cri_.stop_pod_sandbox(socket_, id, 10s);
        (void)cri_.remove_pod_sandbox(socket_, id, 10s);
      }
    }
    stop_daemon();
    kill_leftovers();
    unmount_under_dir();
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  void start_daemon() {
    const std::string log = dir_ + "/containerd.log";
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
    posix_spawnattr_setpgroup(&attr, 0);
    const std::string path = *host::find_executable("containerd", search_path());
    const std::string cfg = dir_ + "/config.toml";
    std::vector<char*> argv{const_cast<char*>(path.c_str()), const_cast<char*>("--config"),
                            const_cast<char*>(cfg.c_str()), nullptr};
    pid_t pid = 0;
    int rc = posix_spawn(&pid, path.c_str(), &fa, &attr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    ASSERT_EQ(rc, 0) << "posix_spawn containerd: " << std::strerror(rc);
    daemon_ = pid;
    const bool up = eventually([&] { return cri_.version(socket_, 1s).ok(); }, 20s);
    ASSERT_TRUE(up) << "containerd did not answer on " << socket_ << ":\n" << slurp(log);
  }

  void stop_daemon() {
    if (daemon_ <= 0) return;
    ::kill(-daemon_, SIGTERM);
    bool gone = eventually([&] { return ::waitpid(daemon_, nullptr, WNOHANG) == daemon_; }, 10s);
    if (!gone) {
      ::kill(-daemon_, SIGKILL);
      ::waitpid(daemon_, nullptr, 0);
    }
    daemon_ = 0;
  }

  // Shims (they leave containerd's process group) started for our socket, and their children.
  void kill_leftovers() {
    std::set<int64_t> shims;
    for (const auto& e : fs::directory_iterator("/proc")) {
      const std::string name = e.path().filename().string();
      if (name.find_first_not_of("0123456789") != std::string::npos) continue;
      std::string cmd = slurp(e.path().string() + "/cmdline");
      if (cmd.find("containerd-shim") != std::string::npos && cmd.find(dir_) != std::string::npos)
        shims.insert(std::stoll(name));
    }
    for (int64_t shim : shims) {
      for (const auto& e : fs::directory_iterator("/proc")) {
        const std::string name = e.path().filename().string();
        if (name.find_first_not_of("0123456789") != std::string::npos) continue;
        std::string stat = slurp(e.path().string() + "/stat");
        auto close = stat.rfind(')');
        if (close == std::string::npos) continue;
        std::istringstream rest(stat.substr(close + 2));
        std::string state;
        int64_t ppid = 0;
        rest >> state >> ppid;
        if (ppid == shim) ::kill(static_cast<pid_t>(std::stoll(name)), SIGKILL);
      }
      ::kill(static_cast<pid_t>(shim), SIGKILL);
    }
  }

  void unmount_under_dir() {
    std::vector<std::string> mounts;
    std::istringstream in(slurp("/proc/self/mountinfo"));
    for (std::string line; std::getline(in, line);) {
      std::istringstream f(line);
      std::string id, parent, dev, root, point;
      f >> id >> parent >> dev >> root >> point;
      if (point.rfind(dir_, 0) == 0) mounts.push_back(point);
    }
    for (auto it = mounts.rbegin(); it != mounts.rend(); ++it) ::umount2(it->c_str(), MNT_DETACH);
  }

  void set_service(const std::string& active, const std::string& sub) {
    bin_.script("systemctl",
                "printf 'Id=containerd.service\\nLoadState=loaded\\nActiveState=" + active +
                    "\\nSubState=" + sub + "\\nNRestarts=0\\nStateChangeTimestamp=\\n'");
  }

  std::string run_sandbox(const std::string& name) {
    runtimes::CriSandboxSpec spec;
    spec.name = name;
    spec.pod_namespace = "gpud-test";
    spec.uid = "uid-" + name;
    auto id = cri_.run_pod_sandbox(socket_, spec, 60s);
    EXPECT_TRUE(id) << id.error().message << "\n" << slurp(dir_ + "/containerd.log");
    if (!id) return "";
    sandboxes_.push_back(*id);
    return *id;
  }

  // The pid of the sandbox's own (pause) process, as ctr lists the task.
  int64_t sandbox_pid(const std::string& id) {
    auto out = host::run_command({"ctr", "--address", socket_, "-n", "k8s.io", "tasks", "ls"},
                                 search_path(), 10s);
    if (!out) return 0;
    std::istringstream in(out->out);
    for (std::string line; std::getline(in, line);) {
      std::istringstream f(line);
      std::string task;
      int64_t pid = 0;
      if (f >> task >> pid && task == id) return pid;
    }
    return 0;
  }

  std::string dir_, socket_, host_, config_text_;
  pid_t daemon_ = 0;
  std::vector<std::string> sandboxes_;
  runtimes::CriClient cri_;
  testing_support::FakeCommands bin_;
  Config config_;
  runtimes::ContainerDirectory directory_;
  std::optional<runtimes::ContainerSource> source_;  // lists into directory_, through the helper
  components::ComponentContext ctx_;
};

TEST_F(ContainerdDaemon, ListsTheSandboxAndItsPauseProcessResolvesToThePod) {
  auto version = cri_.version(socket_, 5s);
  ASSERT_TRUE(version) << version.error().message;
  EXPECT_EQ(version->runtime_name, "containerd");
  EXPECT_EQ(version->runtime_api_version, "v1");
  const std::string id = run_sandbox("trainer-0");
  ASSERT_FALSE(id.empty());

  components::ContainerdComponent c(ctx_);
  ASSERT_TRUE(c.supported());
  CheckResult r = c.check();
  EXPECT_EQ(r.health(), Health::kHealthy) << r.summary();
  EXPECT_EQ(r.states[0].reason, "containerd is running (1 pod sandboxes, 0 containers)");
  auto data = r.states[0].data;
  ASSERT_EQ(data["sandboxes"].size(), 1u) << data.dump();
  EXPECT_EQ(data["sandboxes"][0]["id"], id);
  EXPECT_EQ(data["sandboxes"][0]["name"], "trainer-0");
  EXPECT_EQ(data["sandboxes"][0]["namespace"], "gpud-test");
  EXPECT_EQ(data["sandboxes"][0]["uid"], "uid-trainer-0");
  EXPECT_EQ(data["sandboxes"][0]["state"], "SANDBOX_READY");
  EXPECT_EQ(data["service_active_state"], "active");
  // The uptime of the containerd behind the socket, found through /proc.
  ASSERT_TRUE(data.contains("uptime_seconds")) << data.dump();
  EXPECT_LT(data["uptime_seconds"].get<int64_t>(), 120);

  const int64_t pid = sandbox_pid(id);
  ASSERT_GT(pid, 0) << "ctr tasks ls lists no task " << id;
  const std::string cid = container_id_of(pid);
  ASSERT_EQ(cid, id) << slurp("/proc/" + std::to_string(pid) + "/cgroup");
  auto found = directory_.find(cid);
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->pod_name, "trainer-0");
  EXPECT_EQ(found->pod_namespace, "gpud-test");
  EXPECT_EQ(found->pod_uid, "uid-trainer-0");
  EXPECT_EQ(found->source, "containerd");

  // The pod of that process, as the processes component traces a GPU process, and an Xid line
  // naming it, as the Xid component traces it.
  auto traced = runtimes::attribute_pid(host::HostFs("/"), &directory_, static_cast<uint32_t>(pid));
  ASSERT_TRUE(traced);
  EXPECT_EQ(traced->pod, "trainer-0");
  EXPECT_EQ(traced->pod_namespace, "gpud-test");
  auto xid = testing::xid_line_now(31, pid);
  components::attribute_xid_process(xid.match, xid.time, host::HostFs("/"), &directory_,
                                    /*daemon=*/true, /*saved_log=*/false);
  EXPECT_EQ(xid.match.extra_info.value("pod", ""), "trainer-0") << xid.match.extra_info.dump();
  EXPECT_EQ(xid.match.extra_info.value("namespace", ""), "gpud-test");
  EXPECT_EQ(xid.match.extra_info.value("pod_uid", ""), "uid-trainer-0");
  EXPECT_EQ(xid.match.extra_info.value("attribution_source", ""), "containerd");
}

TEST_F(ContainerdDaemon, AnInactiveServiceOfAYoungContainerdGetsTheGrace) {
  set_service("inactive", "dead");
  components::ContainerdComponent c(ctx_);
  CheckResult r = c.check();
  EXPECT_EQ(r.health(), Health::kHealthy) << r.summary();
  EXPECT_EQ(r.states[0].reason,
            "containerd service is inactive (dead); containerd has not been running for long "
            "enough");
}

TEST_F(ContainerdDaemon, StoppingContainerdIsUnhealthyAsTheRulesSay) {
  const std::string id = run_sandbox("trainer-1");
  ASSERT_FALSE(id.empty());
  components::ContainerdComponent c(ctx_);
  ASSERT_EQ(c.check().health(), Health::kHealthy);
  ASSERT_EQ(directory_.all().size(), 1u);
  ASSERT_TRUE(cri_.stop_pod_sandbox(socket_, id, 30s));
  ASSERT_TRUE(cri_.remove_pod_sandbox(socket_, id, 30s));
  sandboxes_.clear();
  stop_daemon();

  if (!fs::exists(socket_)) {
    // containerd removed its socket: Healthy for four checks, Unhealthy at the fifth.
    for (int n = 1; n <= 4; ++n) {
      CheckResult r = c.check();
      EXPECT_EQ(r.health(), Health::kHealthy) << n << ": " << r.summary();
    }
    CheckResult r = c.check();
    EXPECT_EQ(r.health(), Health::kUnhealthy) << r.summary();
    EXPECT_EQ(r.states[0].reason,
              "containerd socket " + socket_ + " not found in 5 consecutive checks");
    // The socket file left behind by a crashed containerd: not connectable, Unhealthy at once.
    int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", socket_.c_str());
    ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    ::close(fd);
  }
  CheckResult r = c.check();
  EXPECT_EQ(r.health(), Health::kUnhealthy) << r.summary();
  EXPECT_EQ(r.states[0].reason, "containerd installed but not running");
  EXPECT_NE(r.states[0].error.find("cannot connect to unix:" + socket_), std::string::npos)
      << r.states[0].error;
  EXPECT_TRUE(directory_.all().empty());
}

TEST_F(ContainerdDaemon, AToolkitSandboxWithoutTheNvidiaRuntimeIsUnhealthy) {
  const std::string id = run_sandbox("nvidia-container-toolkit-daemonset-x7k2p");
  ASSERT_FALSE(id.empty());
  ctx_.nvidia_pci_present = true;
  components::ContainerdComponent c(ctx_);
  c.set_toolkit_min_age(1s);
  std::this_thread::sleep_for(1100ms);
  CheckResult r = c.check();
  EXPECT_EQ(r.health(), Health::kUnhealthy) << r.summary();
  EXPECT_NE(r.states[0].reason.find("nvidia-container-toolkit pod "
                                    "gpud-test/nvidia-container-toolkit-daemonset-x7k2p has been "
                                    "ready for"),
            std::string::npos)
      << r.states[0].reason;
  EXPECT_NE(r.states[0].reason.find("/etc/containerd/config.toml (and its imports) configures no "
                                    "nvidia runtime"),
            std::string::npos);
  // The nvidia runtime in an imported drop-in, as the GPU operator writes it.
  write_file(host_ + "/etc/containerd/config.toml",
             "imports = [\"/etc/containerd/conf.d/*.toml\"]\n" + config_text_);
  write_file(host_ + "/etc/containerd/conf.d/99-nvidia.toml",
             "version = 2\n[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.nvidia]\n"
             "  runtime_type = \"io.containerd.runc.v2\"\n");
  r = c.check();
  EXPECT_EQ(r.health(), Health::kHealthy) << r.summary();
  auto data = r.states[0].data;
  EXPECT_EQ(data["nvidia_toolkit_pod"], "gpud-test/nvidia-container-toolkit-daemonset-x7k2p");
  EXPECT_EQ(data["nvidia_runtime"],
            "/etc/containerd/conf.d/99-nvidia.toml: "
            "[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.nvidia]");
}

}  // namespace
}  // namespace gpud
