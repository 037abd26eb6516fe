// End-to-end: the InfiniBand component in `gpud run`, with a port drop and a flapping port played
// as a time sequence of sysfs trees (a class directory the test swaps), set-healthy clearing the
// sticky verdict, and `gpud scan` on the fixture nodes.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "tests/e2e/daemon_process.h"

namespace gpud::e2e {
namespace {

using namespace std::chrono_literals;

constexpr const char* kIb = "accelerator-nvidia-infiniband";

std::string fixture(const std::string& sub) {
  return std::string(GPUD_SOURCE_DIR) + "/testing/fixtures/infiniband/" + sub;
}

// Points <dir>/class at `target` atomically (a new link renamed over the old one), so a check
// never sees the class directory missing.
void point_class_at(const std::string& dir, const std::string& target) {
  const std::filesystem::path tmp = dir + "/class.new";
  std::filesystem::remove(tmp);
  std::filesystem::create_directory_symlink(target, tmp);
  std::filesystem::rename(tmp, dir + "/class");
}

// The component's port-change events (ib_port_down / ib_port_up), oldest first.
std::vector<std::string> port_changes(const DaemonProcess& d) {
  std::vector<std::string> out;
  auto r = d.get(std::string("/v1/events?startTime=0&components=") + kIb);
  if (!r || r->status != 200) return out;
  auto body = parse_json(r->body);
  if (!body.is_array() || body.empty()) return out;
  for (const auto& e : body[0]["events"]) {
    std::string name = e.value("name", "");
    // set-healthy keeps the events it acknowledged, marked: they are no longer changes to judge.
    if (e.contains("acknowledged")) continue;
    if (name == "ib_port_down" || name == "ib_port_up") out.insert(out.begin(), name);
  }
  return out;
}

bool reason_has(const nlohmann::json& s, const std::string& part) {
  return s.is_object() && s.value("reason", "").find(part) != std::string::npos;
}

// A host root of the fixture node's /sys and this machine's /proc: the daemon authorizes the
// test's set-healthy from /proc/net/tcp.
std::string node_root(const std::string& dir) {
  const std::string root = dir + "/root";
  std::filesystem::create_directories(root);
  std::filesystem::create_directory_symlink(fixture("h100-ndr-healthy/sys"), root + "/sys");
  std::filesystem::create_directory_symlink("/proc", root + "/proc");
  return root;
}

std::vector<std::string> daemon_args(const std::string& dir) {
  const std::string class_link = dir + "/class";
  return {"--host-root",
          node_root(dir),
          "--infiniband-class-root-dir",
          class_link,
          "--infiniband-check-interval",
          "1s",
          "--infiniband-drop-window",
          "3s",
          "--components",
          std::string(kIb) + ",accelerator-nvidia-peermem"};
}

TEST(InfinibandE2E, PortDropIsUnhealthyUntilSetHealthy) {
  TempDirGuard dir{make_temp_dir()};
  point_class_at(dir.path, fixture("h100-ndr-healthy/sys/class/infiniband"));
  DaemonProcess d(dir.path + "/data", daemon_args(dir.path));
  ASSERT_TRUE(d.ready()) << d.log();
  ASSERT_TRUE(eventually(
      [&] { return reason_has(component_state(d, kIb), "8 of 8 InfiniBand port(s) active"); }, 20s))
      << component_state(d, kIb).dump();

  point_class_at(dir.path, fixture("h100-ndr-port-down/sys/class/infiniband"));
  ASSERT_TRUE(eventually([&] { return port_changes(d).size() == 1; }, 20s)) << d.log();
  EXPECT_EQ(component_state(d, kIb).value("health", ""), "Healthy") << "down, but not for 3 s yet";
  nlohmann::json s;
  ASSERT_TRUE(eventually(
      [&] {
        s = component_state(d, kIb);
        return s.value("health", "") == "Unhealthy";
      },
      20s))
      << s.dump();
  EXPECT_TRUE(reason_has(s, "device(s) down too long: mlx5_3 port 1 (down ")) << s.dump();
  EXPECT_TRUE(reason_has(s, "nearest GPU 0000:5c:00.0")) << s.dump();
  EXPECT_EQ(s["suggested_actions"]["repair_actions"],
            nlohmann::json::array({"HARDWARE_INSPECTION"}))
      << s.dump();
  const std::string metrics = d.get("/metrics")->body;
  EXPECT_NE(metrics.find("accelerator_nvidia_infiniband_link_downed{device_port=\"mlx5_3_1\","
                         "gpud_component=\"accelerator-nvidia-infiniband\"} 1"),
            std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find("accelerator_nvidia_infiniband_port_active{device_port=\"mlx5_3_1\","
                         "gpud_component=\"accelerator-nvidia-infiniband\"} 0"),
            std::string::npos);

  auto r = d.post(std::string("/v1/health-states/set-healthy?components=") + kIb);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
  ASSERT_TRUE(
      eventually([&] { return component_state(d, kIb).value("health", "") == "Healthy"; }, 20s))
      << component_state(d, kIb).dump();
  // The port is still down, but it has no "was up" any more: no new drop after the window.
  std::this_thread::sleep_for(4s);
  EXPECT_EQ(component_state(d, kIb).value("health", ""), "Healthy")
      << component_state(d, kIb).dump();
  EXPECT_TRUE(port_changes(d).empty());
}

TEST(InfinibandE2E, FlappingPortIsStickyAcrossARestartUntilSetHealthy) {
  TempDirGuard dir{make_temp_dir()};
  point_class_at(dir.path, fixture("h100-ndr-flap/00/infiniband"));
  const std::vector<std::string> expected = {"ib_port_down", "ib_port_up",   "ib_port_down",
                                             "ib_port_up",   "ib_port_down", "ib_port_up"};
  const std::vector<std::string> args = daemon_args(dir.path);
  {
    DaemonProcess d(dir.path + "/data", args);
    ASSERT_TRUE(d.ready()) << d.log();
    ASSERT_TRUE(
        eventually([&] { return component_state(d, kIb).value("health", "") == "Healthy"; }, 20s));
    for (size_t n = 1; n <= 6; ++n) {
      point_class_at(dir.path, fixture("h100-ndr-flap/0" + std::to_string(n) + "/infiniband"));
      ASSERT_TRUE(eventually([&] { return port_changes(d).size() == n; }, 20s))
          << "snapshot " << n << ": " << d.log();
      if (n < 6) {
        EXPECT_NE(component_state(d, kIb).value("health", ""), "Unhealthy")
            << n << ": " << component_state(d, kIb).dump();
      }
    }
    EXPECT_EQ(port_changes(d), expected);
    nlohmann::json s;
    ASSERT_TRUE(eventually(
        [&] {
          s = component_state(d, kIb);
          return s.value("health", "") == "Unhealthy";
        },
        20s))
        << s.dump();
    EXPECT_TRUE(reason_has(s,
                           "device(s) flapping between ACTIVE<>DOWN: mlx5_2 port 1 (3 "
                           "down-active cycles, nearest GPU 0000:4b:00.0)"))
        << s.dump();
    EXPECT_EQ(d.stop(), 0);
  }
  // The history is in the store: a restarted daemon still reports the flap.
  DaemonProcess d(dir.path + "/data", args);
  ASSERT_TRUE(d.ready()) << d.log();
  ASSERT_TRUE(eventually(
      [&] { return reason_has(component_state(d, kIb), "flapping between ACTIVE<>DOWN"); }, 20s))
      << component_state(d, kIb).dump();
  auto r = d.post(std::string("/v1/health-states/set-healthy?components=") + kIb);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
  ASSERT_TRUE(
      eventually([&] { return component_state(d, kIb).value("health", "") == "Healthy"; }, 20s))
      << component_state(d, kIb).dump();
}

std::vector<std::string> scan_args(const std::string& tree) {
  return {"scan",
          "--host-root",
          fixture(tree),
          "--components",
          std::string(kIb) + ",accelerator-nvidia-peermem",
          "--infiniband-expected-port-states",
          R"({"at_least_ports":8,"at_least_rate":400})"};
}

TEST(InfinibandE2E, ScanOnTheHealthyNodeIsAllHealthy) {
  auto r = run_gpud(scan_args("h100-ndr-healthy"));
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("✔ accelerator-nvidia-infiniband"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("✔ accelerator-nvidia-peermem"), std::string::npos) << r.out;
}

TEST(InfinibandE2E, ScanOnFaultyNodesNamesThePort) {
  for (auto [tree, part] : {std::pair{"h100-ndr-port-down", "mlx5_3 port 1 DOWN/Disabled"},
                            std::pair{"h100-ndr-port-polling", "mlx5_5 port 1 DOWN/Polling"},
                            std::pair{"h100-ndr-garbled", "rate: cannot parse \"fast\""}}) {
    auto r = run_gpud(scan_args(tree));
    EXPECT_EQ(r.exit_code, 1) << tree << ": " << r.out;
    EXPECT_NE(r.out.find("✘ accelerator-nvidia-infiniband"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find(part), std::string::npos) << tree << ": " << r.out;
    EXPECT_NE(r.out.find("✔ accelerator-nvidia-peermem"), std::string::npos) << r.out;
  }
  auto r = run_gpud(scan_args("h100-ndr-no-peermem"));
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find("✔ accelerator-nvidia-infiniband"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("ibcore is not using peermem module while 8 InfiniBand port(s)"),
            std::string::npos)
      << r.out;
}

TEST(InfinibandE2E, ExpectedPortStatesFromTheConfigFileAsAMap) {
  TempDirGuard dir{make_temp_dir()};
  const std::string config = dir.path + "/gpud.yaml";
  std::ofstream(config) << "infiniband-expected-port-states:\n  at_least_ports: 8\n"
                           "  at_least_rate: 400\ninfiniband-exclude-devices: [mlx5_5]\n";
  auto r = run_gpud({"scan", "--config", config, "--host-root", fixture("h100-ndr-port-polling"),
                     "--components", kIb});
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find("only 7 port(s) are active and >=400 Gb/s, expect >=8 port(s)"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("mlx5_5"), std::string::npos) << "excluded, so not read: " << r.out;
  std::ofstream(config) << "infiniband-expected-port-states: {at_least_ports: many}\n";
  r = run_gpud({"scan", "--config", config, "--components", kIb});
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.out.find("at_least_ports"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace gpud::e2e
