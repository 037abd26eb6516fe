// End-to-end: accelerator-nvidia-fabric-manager in `gpud run` on the fake NVML: the fabric
// manager's log lines become events, a fabric still training within the grace is Initializing, and
// NV_WARN_NOTHING_TO_DO in the log excuses a fabric manager that is installed but not running.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <ctime>
#include <filesystem>
#include <fstream>
#include <set>
#include <thread>

#include "tests/e2e/daemon_process.h"

namespace gpud::e2e {
namespace {

using namespace std::chrono_literals;

constexpr const char* kFm = "accelerator-nvidia-fabric-manager";

std::string source(const std::string& sub) { return std::string(GPUD_SOURCE_DIR) + "/" + sub; }

std::vector<nlohmann::json> fm_events(const DaemonProcess& d) {
  auto r = d.get(std::string("/v1/events?startTime=0&components=") + kFm);
  if (!r || r->status != 200) return {};
  auto body = parse_json(r->body);
  if (!body.is_array() || body.empty()) return {};
  return body[0]["events"].get<std::vector<nlohmann::json>>();
}

std::vector<std::string> fm_args(const std::string& log_file, const std::string& grace) {
  return {"--nvml-lib",
          GPUD_FAKE_NVML,
          "--nvidia-check-interval",
          "1s",
          "--components",
          kFm,
          "--fabric-manager-log-file",
          log_file,
          "--fabric-manager-training-grace",
          grace};
}

TEST(FabricManagerE2E, LogLinesBecomeEventsAndATrainingFabricIsInitializing) {
  TempDirGuard dir{make_temp_dir()};
  const std::string log = dir.path + "/fabricmanager.log";
  // GPU 6 of this scenario is "In Progress", GPU 7 has a degraded fabric. The grace is an hour
  // longer than this machine has been up, so GPU 6 is still training; GPU 7 is Unhealthy
  // regardless.
  double uptime = 0;
  std::ifstream("/proc/uptime") >> uptime;
  ASSERT_GT(uptime, 0);
  const std::string grace = std::to_string(static_cast<long>(uptime) + 3600) + "s";
  DaemonProcess d(
      dir.path + "/data", fm_args(log, grace), true,
      {"FAKE_NVML_SCENARIO=" + source("testing/fixtures/nvml/h100x8-fabric-degraded.json")});
  ASSERT_TRUE(d.ready()) << d.log();
  nlohmann::json s;
  ASSERT_TRUE(eventually(
      [&] {
        s = component_state(d, kFm);
        return s.value("reason", "").find("fabric still training") != std::string::npos;
      },
      20s))
      << s.dump() << d.log();
  EXPECT_EQ(s.value("health", ""), "Unhealthy") << "GPU 7's degraded fabric: " << s.dump();
  EXPECT_NE(s.value("reason", "").find("fabric still training (state In Progress)"),
            std::string::npos)
      << s.dump();
  EXPECT_EQ(s.value("reason", "").find("state=In Progress"), std::string::npos) << s.dump();

  // The log appears after the start: all of it is new.
  std::filesystem::copy_file(source("testing/fixtures/fabric-manager/fabricmanager.log"), log);
  std::vector<nlohmann::json> events;
  ASSERT_TRUE(eventually(
      [&] {
        events = fm_events(d);
        return events.size() >= 6;
      },
      20s))
      << nlohmann::json(events).dump();
  std::multiset<std::string> names;
  for (const auto& e : events) {
    names.insert(e.value("name", ""));
    EXPECT_EQ(e.value("type", ""), "Warning") << e.dump();
  }
  EXPECT_EQ(
      names,
      (std::multiset<std::string>{
          "fabricmanager_nvswitch_fatal_error", "fabricmanager_nvswitch_non_fatal_error",
          "fabricmanager_nvswitch_non_fatal_error", "fabricmanager_nvswitch_nvlink_failure",
          "fabricmanager_nvswitch_topology_mismatch", "fabricmanager_nvswitch_nothing_to_do"}));
  // A restart re-reads the file's backlog and stores nothing twice.
  ASSERT_EQ(d.stop(), 0);
  DaemonProcess again(
      dir.path + "/data", fm_args(log, grace), true,
      {"FAKE_NVML_SCENARIO=" + source("testing/fixtures/nvml/h100x8-fabric-degraded.json")});
  ASSERT_TRUE(again.ready()) << again.log();
  ASSERT_TRUE(eventually([&] { return !component_state(again, kFm).empty(); }, 20s));
  std::this_thread::sleep_for(2s);
  EXPECT_EQ(fm_events(again).size(), events.size());
}

bool port_6666_closed() {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(6666);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bool closed = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0;
  ::close(fd);
  return closed;
}

// A node with an NVSwitch and nv-fabricmanager installed but not listening: Unhealthy, until the
// log says NV_WARN_NOTHING_TO_DO (it found nothing to manage and exited).
TEST(FabricManagerE2E, NothingToDoInTheLogExcusesAStoppedFabricManager) {
  if (!port_6666_closed()) GTEST_SKIP() << "something listens on 127.0.0.1:6666 on this machine";
  TempDirGuard dir{make_temp_dir()};
  const std::string root = dir.path + "/root";
  const std::string sw = root + "/sys/bus/pci/devices/0000:05:00.0";
  std::filesystem::create_directories(sw);
  std::ofstream(sw + "/vendor") << "0x10de\n";
  std::ofstream(sw + "/class") << "0x068000\n";
  const std::string bin = dir.path + "/bin";
  std::filesystem::create_directories(bin);
  std::ofstream(bin + "/nv-fabricmanager") << "#!/bin/sh\nexit 0\n";
  std::filesystem::permissions(bin + "/nv-fabricmanager", std::filesystem::perms::owner_all);
  const std::string log = dir.path + "/fabricmanager.log";
  std::vector<std::string> args = fm_args(log, "5m");
  args.insert(args.end(), {"--host-root", root});
  const char* path = std::getenv("PATH");
  DaemonProcess d(dir.path + "/data", args, true,
                  {"FAKE_NVML_SCENARIO=" + source("testing/fixtures/nvml/h100x8-healthy.json"),
                   "PATH=" + bin + ":" + (path != nullptr ? path : "/usr/bin:/bin")});
  ASSERT_TRUE(d.ready()) << d.log();
  nlohmann::json s;
  ASSERT_TRUE(eventually(
      [&] {
        s = component_state(d, kFm);
        return s.value("reason", "").find("fabric manager found but not active") !=
               std::string::npos;
      },
      20s))
      << s.dump() << d.log();
  EXPECT_EQ(s.value("health", ""), "Unhealthy") << s.dump();

  char stamp[64];
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  ::localtime_r(&now, &tm);
  std::strftime(stamp, sizeof stamp, "[%b %d %Y %H:%M:%S]", &tm);
  std::ofstream(log, std::ios::app)
      << stamp << " [ERROR] [tid 841] request to query NVSwitch device information from NVSwitch "
      << "driver failed with error:NV_WARN_NOTHING_TO_DO\n";
  ASSERT_TRUE(eventually(
      [&] {
        s = component_state(d, kFm);
        return s.value("health", "") == "Healthy";
      },
      20s))
      << s.dump();
  EXPECT_NE(s.value("reason", "").find("it logged NV_WARN_NOTHING_TO_DO at "), std::string::npos)
      << s.dump();
}

}  // namespace
}  // namespace gpud::e2e
