#include "components/nvidia/infiniband.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <thread>

#include "components/nvidia/test_result.h"
#include "host/pci.h"
#include "testing/memory_event_log.h"

namespace gpud::components {
namespace {

using namespace std::chrono_literals;
using testing::action_of;
using testing::contains;

std::string fixture(std::string_view sub) {
  return std::string(GPUD_SOURCE_DIR) + "/testing/fixtures/infiniband/" + std::string(sub);
}

host::InfinibandSnapshot snapshot_of(const std::string& class_dir) {
  auto s = host::read_infiniband(class_dir, {});
  EXPECT_TRUE(s) << s.error().message;
  return s ? *s : host::InfinibandSnapshot{};
}

host::InfinibandSnapshot node(std::string_view tree) {
  return snapshot_of(fixture(std::string(tree) + "/sys/class/infiniband"));
}

NearestGpus nearest_of(const host::InfinibandSnapshot& s) {
  const host::HostFs fs(fixture("h100-ndr-healthy"));
  std::map<std::string, std::vector<std::string>> gpus;
  for (const std::string& g : host::find_nvidia_gpus(fs)) gpus[g] = host::pci_path_of_device(fs, g);
  return nearest_gpus(s.devices, gpus);
}

InfinibandPolicy ndr8() {
  InfinibandPolicy p;
  p.at_least_ports = 8;
  p.at_least_rate_gbps = 400;
  return p;
}

const TimePoint kT0 = Clock::now() - 1h;

CheckResult judge(const host::InfinibandSnapshot& s, const InfinibandPolicy& policy,
                  const std::vector<Event>& history = {}, TimePoint now = kT0) {
  return evaluate_infiniband(s, history, nearest_of(s), policy, now);
}

// Plays snapshots as checks would: records each check's transitions into `history` (newest first).
struct Player {
  std::vector<Event> history;
  std::set<std::string> last_up;
  void play(const host::InfinibandSnapshot& s, TimePoint now) {
    auto changes = port_transitions(s, history, last_up, now);
    history.insert(history.begin(), changes.begin(), changes.end());
    for (const auto& p : s.ports) {
      if (port_up(p)) last_up.insert(p.device_port());
      if (port_down(p)) last_up.erase(p.device_port());
    }
  }
};

TEST(InfinibandRule, HealthyNdrNodeCountsOnlyInfinibandPorts) {
  auto r = judge(node("h100-ndr-healthy"), ndr8());
  EXPECT_EQ(r.health(), Health::kHealthy) << r.summary();
  EXPECT_EQ(r.states[0].reason,
            "8 of 8 InfiniBand port(s) LinkUp at >=400 Gb/s (expect >=8); 1 Ethernet/other port(s) "
            "ignored");
  EXPECT_EQ(r.states[0].extra_info.at("infiniband_ports"), "8");
  EXPECT_TRUE(contains(r.detail,
                       "mlx5_0 port 1 (InfiniBand): ACTIVE LinkUp 400 Gb/s, nearest GPU "
                       "0000:18:00.0"))
      << r.detail;
}

TEST(InfinibandRule, WithoutExpectedPortStatesTheCountIsNotJudged) {
  auto r = judge(node("h100-ndr-port-down"), InfinibandPolicy{});
  EXPECT_EQ(r.health(), Health::kHealthy) << r.summary();
  EXPECT_TRUE(contains(r.summary(), "7 of 8 InfiniBand port(s) active (no expected port states"))
      << r.summary();
}

TEST(InfinibandRule, PortDownNamesThePortAndItsNearestGpu) {
  auto r = judge(node("h100-ndr-port-down"), ndr8());
  EXPECT_EQ(r.health(), Health::kUnhealthy);
  EXPECT_EQ(r.states[0].reason,
            "only 7 port(s) are active and >=400 Gb/s, expect >=8 port(s): mlx5_3 port 1 "
            "DOWN/Disabled, nearest GPU 0000:5c:00.0");
  EXPECT_FALSE(action_of(r)) << "GPUd suggests nothing for a port count (PR #1055)";
}

TEST(InfinibandRule, PollingPortIsNamed) {
  auto r = judge(node("h100-ndr-port-polling"), ndr8());
  EXPECT_EQ(r.health(), Health::kUnhealthy);
  EXPECT_TRUE(contains(r.summary(), "mlx5_5 port 1 DOWN/Polling, nearest GPU 0000:ba:00.0"))
      << r.summary();
}

TEST(InfinibandRule, PortsBelowTheRateAreNamedWithTheirRate) {
  auto s = node("h100-ndr-healthy");
  s.ports[2].rate_gbps = 200;
  auto r = judge(s, ndr8());
  EXPECT_EQ(r.health(), Health::kUnhealthy);
  EXPECT_TRUE(contains(r.summary(), "mlx5_2 port 1 ACTIVE/LinkUp at 200 Gb/s")) << r.summary();
}

TEST(InfinibandRule, GarbledValuesAreAReasonNeverHealthy) {
  auto r = judge(node("h100-ndr-garbled"), InfinibandPolicy{});
  EXPECT_EQ(r.health(), Health::kDegraded);
  EXPECT_TRUE(contains(r.summary(), "mlx5_1 port 1 rate: cannot parse \"fast\"")) << r.summary();
  EXPECT_TRUE(contains(r.summary(), "mlx5_4 port 1 counters/symbol_error: cannot parse \"NaN\""))
      << r.summary();
  EXPECT_TRUE(contains(r.summary(), "mlx5_6 port 1 state: open ")) << r.summary();
  // With the count judged, the port without a rate is not up at 400 Gb/s.
  r = judge(node("h100-ndr-garbled"), ndr8());
  EXPECT_EQ(r.health(), Health::kUnhealthy);
  EXPECT_TRUE(contains(r.summary(), "only 7 port(s)")) << r.summary();
}

TEST(InfinibandRule, UnreadableClassDirAndNoDevices) {
  Result<host::InfinibandSnapshot> bad = make_error("cannot list /x: Permission denied");
  auto r = evaluate_infiniband(bad, {}, {}, ndr8(), kT0);
  EXPECT_EQ(r.health(), Health::kUnhealthy);
  EXPECT_TRUE(contains(r.summary(), "Permission denied"));
  r = judge(host::InfinibandSnapshot{}, InfinibandPolicy{});
  EXPECT_EQ(r.health(), Health::kHealthy);
  EXPECT_EQ(r.summary(), "no InfiniBand devices");
  r = judge(host::InfinibandSnapshot{}, ndr8());
  EXPECT_EQ(r.health(), Health::kUnhealthy);
  EXPECT_TRUE(contains(r.summary(), "only 0 port(s)")) << r.summary();
}

TEST(InfinibandRule, PortDownForFourMinutesWithUnchangedLinkDownedIsADrop) {
  Player p;
  p.play(node("h100-ndr-healthy"), kT0);
  EXPECT_TRUE(p.history.empty()) << "no change to record while every port stays up";
  p.play(node("h100-ndr-port-down"), kT0 + 30s);
  ASSERT_EQ(p.history.size(), 1U);
  EXPECT_EQ(p.history[0].name, kIbPortDownEvent);
  EXPECT_EQ(p.history[0].extra_info["device_port"], "mlx5_3_1");
  EXPECT_EQ(p.history[0].extra_info["link_downed"], 1);
  p.play(node("h100-ndr-port-down"), kT0 + 60s);
  EXPECT_EQ(p.history.size(), 1U) << "still down: nothing new";

  auto r = judge(node("h100-ndr-port-down"), InfinibandPolicy{}, p.history, kT0 + 30s + 239s);
  EXPECT_EQ(r.health(), Health::kHealthy) << r.summary();
  r = judge(node("h100-ndr-port-down"), InfinibandPolicy{}, p.history, kT0 + 30s + 240s);
  EXPECT_EQ(r.health(), Health::kUnhealthy);
  EXPECT_EQ(action_of(r), RepairAction::kHardwareInspection);
  EXPECT_EQ(r.states[0].reason,
            "device(s) down too long: mlx5_3 port 1 (down 4m0s, DOWN/Disabled, nearest GPU "
            "0000:5c:00.0)");
  // With the count judged both reasons are given.
  r = judge(node("h100-ndr-port-down"), ndr8(), p.history, kT0 + 10min);
  EXPECT_TRUE(contains(r.summary(), "only 7 port(s)"));
  EXPECT_TRUE(contains(r.summary(), "; device(s) down too long: mlx5_3 port 1 (down 9m30s"));

  // Back up after 5 minutes: still reported for 10 minutes, then not.
  p.play(node("h100-ndr-healthy"), kT0 + 30s + 5min);
  ASSERT_EQ(p.history[0].name, kIbPortUpEvent);
  EXPECT_EQ(p.history[0].extra_info["down_seconds"], 300);
  r = judge(node("h100-ndr-healthy"), ndr8(), p.history, kT0 + 30s + 14min);
  EXPECT_EQ(r.health(), Health::kUnhealthy);
  EXPECT_TRUE(contains(r.summary(), "mlx5_3 port 1 (down 5m0s, active again 9m0s ago"))
      << r.summary();
  r = judge(node("h100-ndr-healthy"), ndr8(), p.history, kT0 + 30s + 16min);
  EXPECT_EQ(r.health(), Health::kHealthy) << r.summary();
}

TEST(InfinibandRule, LinkDownedRisingWhileDownRestartsTheDrop) {
  Player p;
  p.play(node("h100-ndr-healthy"), kT0);
  p.play(node("h100-ndr-port-down"), kT0 + 30s);
  auto s = node("h100-ndr-port-down");
  for (auto& port : s.ports)
    if (port.device == "mlx5_3") port.counters["link_downed"] = 2;
  // Judged before the change is recorded, the counter differs: not the same drop.
  auto r = judge(s, InfinibandPolicy{}, p.history, kT0 + 10min);
  EXPECT_EQ(r.health(), Health::kHealthy) << r.summary();
  p.play(s, kT0 + 10min);
  ASSERT_EQ(p.history.size(), 2U);
  EXPECT_TRUE(contains(p.history[0].message, "again: link_downed rose")) << p.history[0].message;
  r = judge(s, InfinibandPolicy{}, p.history, kT0 + 13min);
  EXPECT_EQ(r.health(), Health::kHealthy) << r.summary();
  r = judge(s, InfinibandPolicy{}, p.history, kT0 + 14min);
  EXPECT_EQ(r.health(), Health::kUnhealthy) << r.summary();
}

TEST(InfinibandRule, APortNeverSeenUpIsNoDrop) {
  Player p;
  p.play(node("h100-ndr-port-polling"), kT0);
  p.play(node("h100-ndr-port-polling"), kT0 + 10min);
  EXPECT_TRUE(p.history.empty()) << "an uncabled port never went down: it was never up";
  auto r = judge(node("h100-ndr-port-polling"), InfinibandPolicy{}, p.history, kT0 + 10min);
  EXPECT_EQ(r.health(), Health::kHealthy) << r.summary();
}

TEST(InfinibandRule, ThreeDownActiveCyclesAreAFlapStickyUntilTheHistoryGoes) {
  Player p;
  CheckResult r;
  for (int n = 0; n <= 6; ++n) {
    const TimePoint now = kT0 + n * 30s;
    auto s = snapshot_of(fixture("h100-ndr-flap/0" + std::to_string(n) + "/infiniband"));
    p.play(s, now);
    r = judge(s, InfinibandPolicy{}, p.history, now);
    if (n < 6) {
      EXPECT_EQ(r.health(), Health::kHealthy) << n << ": " << r.summary();
    }
  }
  EXPECT_EQ(p.history.size(), 6U);
  EXPECT_EQ(r.health(), Health::kUnhealthy);
  EXPECT_EQ(action_of(r), RepairAction::kHardwareInspection);
  EXPECT_EQ(r.states[0].reason,
            "device(s) flapping between ACTIVE<>DOWN: mlx5_2 port 1 (3 down-active cycles, "
            "nearest GPU 0000:4b:00.0)");
  // Sticky: days later, with every port up, the flap is still reported.
  r = judge(node("h100-ndr-healthy"), ndr8(), p.history, kT0 + 72h);
  EXPECT_EQ(r.health(), Health::kUnhealthy);
  // A set-healthy purges the history: healthy again.
  r = judge(node("h100-ndr-healthy"), ndr8(), {}, kT0 + 72h);
  EXPECT_EQ(r.health(), Health::kHealthy);
}

// GPUd's --infiniband-flap-auto-clear-window
// (components/accelerator/nvidia/infiniband/component.go, flapAutoClearWindow): a flap is surfaced
// while its port is not up, and until it has been up the window long; judged per port here.
TEST(InfinibandRule, WithAnAutoClearWindowAFlapClearsOnceItsPortHasBeenUpThatLong) {
  Player p;
  InfinibandPolicy policy;
  policy.flap_auto_clear = 10min;
  CheckResult r;
  for (int n = 0; n <= 6; ++n) {
    auto s = snapshot_of(fixture("h100-ndr-flap/0" + std::to_string(n) + "/infiniband"));
    p.play(s, kT0 + n * 30s);
  }
  ASSERT_EQ(p.history[0].name, kIbPortUpEvent);
  const TimePoint back = p.history[0].time;
  auto flap = snapshot_of(fixture("h100-ndr-flap/06/infiniband"));
  r = judge(flap, policy, p.history, back + 9min + 59s);
  EXPECT_EQ(r.health(), Health::kUnhealthy);
  EXPECT_EQ(action_of(r), RepairAction::kHardwareInspection);
  EXPECT_EQ(r.states[0].reason,
            "device(s) flapping between ACTIVE<>DOWN: mlx5_2 port 1 (3 down-active cycles, "
            "active again 9m59s ago, clears after 10m0s, nearest GPU 0000:4b:00.0)");
  r = judge(flap, policy, p.history, back + 10min);
  EXPECT_EQ(r.health(), Health::kHealthy) << r.summary();
  // Without the window (GPUd's default) the same flap is still reported.
  r = judge(flap, InfinibandPolicy{}, p.history, back + 10min);
  EXPECT_EQ(r.health(), Health::kUnhealthy);

  // A port down again keeps the flap reported however long ago it last came back.
  auto down = snapshot_of(fixture("h100-ndr-flap/05/infiniband"));
  r = judge(down, policy, p.history, back + 72h);
  EXPECT_EQ(r.health(), Health::kUnhealthy) << r.summary();
  EXPECT_TRUE(contains(r.summary(), "(3 down-active cycles, nearest GPU")) << r.summary();
  // Once the down is recorded, the newest change is not a return: reported as well.
  p.play(down, back + 72h);
  ASSERT_EQ(p.history[0].name, kIbPortDownEvent);
  r = judge(flap, policy, p.history, back + 72h + 1min);
  EXPECT_EQ(r.health(), Health::kUnhealthy) << r.summary();
}

TEST(InfinibandRule, NearestGpusShareTheAdaptersPcieSwitch) {
  auto s = node("h100-ndr-healthy");
  auto n = nearest_of(s);
  EXPECT_EQ(n.at("mlx5_0"), std::vector<std::string>{"0000:18:00.0"});
  EXPECT_EQ(n.at("mlx5_7"), std::vector<std::string>{"0000:dc:00.0"});
  EXPECT_EQ(n.count("mlx5_8"), 0U) << "the front-end NIC shares no bridge with a GPU";
  // Two GPUs under the same switch are both named.
  std::map<std::string, std::vector<std::string>> gpus = {
      {"0000:18:00.0", {"0000:15:01.0", "0000:16:00.0", "0000:17:00.0", "0000:18:00.0"}},
      {"0000:1a:00.0", {"0000:15:01.0", "0000:16:00.0", "0000:17:02.0", "0000:1a:00.0"}},
      {"0000:30:00.0", {"0000:15:01.0", "0000:30:00.0"}}};
  n = nearest_gpus(s.devices, gpus);
  EXPECT_EQ(n.at("mlx5_0"), (std::vector<std::string>{"0000:18:00.0", "0000:1a:00.0"}));
}

// The component on a class directory that a test swaps between trees.
struct ComponentHarness {
  ComponentHarness() {
    dir = std::filesystem::temp_directory_path() /
          ("gpud-ib-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    std::filesystem::create_directories(dir);
    config.host_root = fixture("h100-ndr-healthy");
    config.infiniband_class_root_dir = (dir / "class").string();
    config.infiniband_drop_window = 1s;
    ctx.config = &config;
    ctx.events = &log;
    ctx.metrics = &metrics;
  }
  ~ComponentHarness() { std::filesystem::remove_all(dir); }
  void use(const std::string& class_dir) {
    std::filesystem::remove(dir / "class");
    std::filesystem::create_directory_symlink(class_dir, dir / "class");
  }
  static inline int counter = 0;
  std::filesystem::path dir;
  Config config;
  testing_support::MemoryEventLog log;
  MetricRegistry metrics;
  ComponentContext ctx;
};

TEST(InfinibandComponent, DropThenSetHealthyClearsIt) {
  ComponentHarness h;
  h.use(fixture("h100-ndr-healthy/sys/class/infiniband"));
  InfinibandComponent c(h.ctx);
  EXPECT_TRUE(c.supported());
  EXPECT_EQ(c.check().health(), Health::kHealthy);
  h.use(fixture("h100-ndr-port-down/sys/class/infiniband"));
  EXPECT_EQ(c.check().health(), Health::kHealthy);
  std::this_thread::sleep_for(1100ms);
  auto r = c.check();
  EXPECT_EQ(r.health(), Health::kUnhealthy);
  EXPECT_TRUE(contains(r.summary(), "device(s) down too long: mlx5_3 port 1")) << r.summary();
  auto events = h.log.query(c.name(), TimePoint::min(), TimePoint::max());
  ASSERT_TRUE(events);
  ASSERT_EQ(events->size(), 1U);
  EXPECT_EQ((*events)[0].name, kIbPortDownEvent);

  ASSERT_TRUE(c.set_healthy({Clock::now(), "uid:0"}));
  r = c.check();
  EXPECT_EQ(r.health(), Health::kHealthy) << r.summary();
  std::this_thread::sleep_for(1100ms);
  EXPECT_EQ(c.check().health(), Health::kHealthy) << "a port still down is no new drop";
}

TEST(InfinibandComponent, MetricsPerPortAndAbsentWhenUnreadable) {
  ComponentHarness h;
  h.use(fixture("h100-ndr-port-down/sys/class/infiniband"));
  InfinibandComponent c(h.ctx);
  c.check();
  std::string text = h.metrics.prometheus_text();
  EXPECT_TRUE(contains(text, "accelerator_nvidia_infiniband_link_downed{device_port=\"mlx5_3_1\""))
      << text;
  EXPECT_TRUE(contains(text, "accelerator_nvidia_infiniband_port_active{device_port=\"mlx5_3_1\""));
  EXPECT_TRUE(
      contains(text, "accelerator_nvidia_infiniband_port_rate_gbps{device_port=\"mlx5_0_1\""));
  EXPECT_TRUE(contains(text, "accelerator_nvidia_infiniband_hw_counter{counter=\"out_of_buffer\""));
  EXPECT_FALSE(contains(text, "device_port=\"mlx5_8_1\"")) << "Ethernet ports are not InfiniBand's";
  h.use(fixture("h100-ndr-garbled/sys/class/infiniband"));
  c.check();
  text = h.metrics.prometheus_text();
  EXPECT_FALSE(
      contains(text, "accelerator_nvidia_infiniband_symbol_error{device_port=\"mlx5_4_1\""));
  EXPECT_FALSE(
      contains(text, "accelerator_nvidia_infiniband_port_rate_gbps{device_port=\"mlx5_1_1\""));
  EXPECT_TRUE(
      contains(text, "accelerator_nvidia_infiniband_symbol_error{device_port=\"mlx5_3_1\""));
}

Event mlx5_event(const char* name, TimePoint t, std::string message = "MLX5 fault") {
  Event e;
  e.component = "accelerator-nvidia-infiniband";
  e.time = t;
  e.name = name;
  e.message = std::move(message);
  return e;
}

// A compromised or fatally failed adapter, or one that did not initialise (its probe failed or its
// firmware never left its initializing state), needs a reboot (and an inspection when it failed
// again after reboots); a reboot after it ends the fault.
TEST(Mlx5KernelLog, FirmwareFaultsAndFailedProbesAreUnhealthyUntilAReboot) {
  const TimePoint t0 = Clock::from_time_t(1'700'000'000);
  auto v = evaluate_mlx5_events(
      {mlx5_event(kMlx5FatalErrorEvent, t0 + 1h, "MLX5 fatal error 1 (PCI reads fail)"),
       mlx5_event(kMlx5FirmwareSyndromeEvent, t0 + 1h)},
      {}, t0 + 2h);
  EXPECT_EQ(v.health, Health::kUnhealthy);
  EXPECT_EQ(v.reason, "MLX5 adapter failed: MLX5 fatal error 1 (PCI reads fail) (1x)");
  ASSERT_TRUE(v.actions);
  EXPECT_EQ(v.actions->repair_actions, std::vector{RepairAction::kRebootSystem});
  EXPECT_EQ(
      evaluate_mlx5_events({mlx5_event(kMlx5HealthCompromisedEvent, t0 + 1h)}, {t0 + 2h}, t0 + 3h)
          .health,
      Health::kHealthy);
  auto again = evaluate_mlx5_events(
      {mlx5_event(kMlx5ProbeFailedEvent, t0 + 2h), mlx5_event(kMlx5ProbeFailedEvent, t0 + 4h)},
      {t0 + 1h, t0 + 3h}, t0 + 5h);
  EXPECT_EQ(again.health, Health::kUnhealthy);
  EXPECT_EQ(again.actions->repair_actions, std::vector{RepairAction::kHardwareInspection});
  // Firmware that never left its pre-initializing state: the adapter is down until a reboot.
  auto stuck = evaluate_mlx5_events(
      {mlx5_event(kMlx5FirmwareInitTimeoutEvent, t0 + 1h,
                  "MLX5 firmware stuck in its pre-initializing state for 120000 ms")},
      {}, t0 + 2h);
  EXPECT_EQ(stuck.health, Health::kUnhealthy);
  EXPECT_EQ(stuck.reason,
            "MLX5 adapter failed: MLX5 firmware stuck in its pre-initializing state for 120000 ms "
            "(1x)");
  EXPECT_EQ(
      evaluate_mlx5_events({mlx5_event(kMlx5FirmwareInitTimeoutEvent, t0 + 1h)}, {t0 + 2h}, t0 + 3h)
          .health,
      Health::kHealthy);
}

// Command and TX timeouts and module errors since the newest reboot, within a day: Degraded, no
// action; older ones, the syndrome and the earlier events (power, temperature) change nothing.
TEST(Mlx5KernelLog, TimeoutsAndModuleErrorsOfTheLastDayAreDegraded) {
  const TimePoint t0 = Clock::from_time_t(1'700'000'000);
  auto v = evaluate_mlx5_events(
      {mlx5_event(kMlx5TxTimeoutEvent, t0 + 2h, "MLX5 TX timeout on eth2"),
       mlx5_event(kMlx5TxTimeoutEvent, t0 + 3h, "MLX5 TX timeout on eth3"),
       mlx5_event(kMlx5CommandTimeoutEvent, t0 - 1h), mlx5_event("pci_power_insufficient", t0)},
      {t0}, t0 + 4h);
  EXPECT_EQ(v.health, Health::kDegraded);
  EXPECT_EQ(v.reason, "MLX5 adapter trouble: MLX5 TX timeout on eth3 (2x in 24h)");
  EXPECT_FALSE(v.actions);
  EXPECT_EQ(evaluate_mlx5_events({mlx5_event(kMlx5PortModuleErrorEvent, t0)}, {}, t0 + 25h).health,
            Health::kHealthy);
  EXPECT_EQ(evaluate_mlx5_events({mlx5_event(kMlx5FirmwareSyndromeEvent, t0),
                                  mlx5_event("port_module_high_temperature", t0)},
                                 {}, t0 + 1h)
                .health,
            Health::kHealthy);
}

}  // namespace
}  // namespace gpud::components
