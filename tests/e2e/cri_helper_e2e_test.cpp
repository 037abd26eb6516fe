// The daemon lists a CRI runtime (the fake gRPC server of src/runtimes/cri_module) through
// `gpud cri-helper` children, and never maps the cri module or gRPC itself: that is what keeps its
// footprint with containerd below node_exporter's (bench/run-bench.sh measures it).
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>

#include "testing/fake_command.h"
#include "tests/e2e/daemon_process.h"

extern char** environ;

namespace gpud::e2e {
namespace {

using namespace std::chrono_literals;

#ifdef GPUD_CRI_FAKE_SERVER
// The fake CRI runtime on <dir>/cri.sock, killed at scope exit.
struct FakeCriRuntime {
  explicit FakeCriRuntime(const std::string& dir) : socket(dir + "/cri.sock") {
    const char* argv[] = {GPUD_CRI_FAKE_SERVER, "runtime", socket.c_str(), nullptr};
    if (::posix_spawn(&pid, GPUD_CRI_FAKE_SERVER, nullptr, nullptr, const_cast<char**>(argv),
                      environ) != 0)
      pid = 0;
    eventually([this] { return std::filesystem::exists(socket); }, 10s);
  }
  ~FakeCriRuntime() {
    if (pid > 0) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
  }
  std::string socket;
  pid_t pid = 0;
};

bool maps_mention(pid_t pid, const std::string& what) {
  return read_file("/proc/" + std::to_string(pid) + "/maps").find(what) != std::string::npos;
}

TEST(CriHelperE2E, TheDaemonListsThroughAChildAndNeverMapsGrpc) {
  TempDirGuard dir{make_temp_dir()};
  FakeCriRuntime cri(dir.path);
  ASSERT_TRUE(std::filesystem::exists(cri.socket));
  // containerd "installed" (the component applies), its service unknown to systemctl.
  testing_support::FakeCommands bin;
  bin.script("containerd", "exit 0");
  bin.script("systemctl", "echo 'LoadState=not-found'; echo 'ActiveState=inactive'");
  const char* path = std::getenv("PATH");
  DaemonProcess d(dir.path + "/data",
                  {"--components", "containerd", "--containerd-socket", cri.socket}, true,
                  {"PATH=" + bin.dir() + ":" + (path != nullptr ? path : "/usr/bin:/bin")});
  ASSERT_TRUE(d.ready()) << d.log();
  nlohmann::json state;
  ASSERT_TRUE(eventually(
      [&] {
        state = component_state(d, "containerd");
        return state.value("reason", "").find("pod sandboxes") != std::string::npos;
      },
      30s))
      << state.dump() << d.log();
  EXPECT_EQ(state.value("health", ""), "Healthy") << state.dump();
  EXPECT_EQ(state.value("reason", ""), "containerd is running (1 pod sandboxes, 1 containers)");
  EXPECT_FALSE(maps_mention(d.pid(), "libgpud-cri")) << "the daemon loaded the cri module";
  EXPECT_FALSE(maps_mention(d.pid(), "libgrpc")) << "the daemon mapped gRPC";

  // The runtime gone (its socket left behind): Unhealthy on the next check, never Healthy.
  ::kill(cri.pid, SIGKILL);
  ::waitpid(cri.pid, nullptr, 0);
  cri.pid = 0;
  auto triggered = d.get("/v1/components/trigger-check?componentName=containerd");
  ASSERT_TRUE(triggered) << d.log();
  ASSERT_TRUE(eventually(
      [&] {
        state = component_state(d, "containerd");
        return state.value("health", "") != "Healthy";
      },
      30s))
      << state.dump();
  EXPECT_EQ(state.value("health", ""), "Unhealthy") << state.dump();
  EXPECT_FALSE(maps_mention(d.pid(), "libgrpc"));
}
#endif

}  // namespace
}  // namespace gpud::e2e
