#include "components/host/os.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "components/kernel_log_test_util.h"
#include "core/time_util.h"
#include "testing/memory_event_log.h"

namespace gpud::components {
namespace {

using namespace std::chrono_literals;

std::string fixture(std::string_view sub) {
  return std::string(GPUD_SOURCE_DIR) + "/testing/fixtures/host-os/" + std::string(sub);
}

using FakeEventLog = testing_support::MemoryEventLog;

struct Harness {
  explicit Harness(std::string root, bool scan_mode = false) {
    config.host_root = std::move(root);
    ctx = {&config, &log, &metrics, scan_mode};
  }
  Config config;
  FakeEventLog log;
  MetricRegistry metrics;
  ComponentContext ctx;
};

// A host root with only /proc/stat, so the boot time is exactly btime.
class BootRoot {
 public:
  BootRoot() {
    dir_ = std::filesystem::temp_directory_path() /
           ("gpud-os-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter_++));
    std::filesystem::create_directories(dir_ / "proc");
  }
  ~BootRoot() { std::filesystem::remove_all(dir_); }
  void set_btime(int64_t btime) {
    std::ofstream(dir_ / "proc" / "stat") << "cpu 1 2 3 4\nbtime " << btime << "\nprocesses 1\n";
  }
  std::string path() const { return dir_.string(); }

 private:
  static inline int counter_ = 0;
  std::filesystem::path dir_;
};

OsSnapshot base_snapshot() {
  OsSnapshot s;
  s.info.pid_max = 100000;
  s.info.file_max = 100000;
  s.info.file_handles_allocated = 1000;
  s.processes = 300;
  return s;
}

TEST(OsRule, HealthyWhenNothingIsWrong) {
  OsEvaluation ev = evaluate_os(base_snapshot());
  EXPECT_EQ(ev.health, Health::kHealthy);
  EXPECT_EQ(ev.reason, "ok");
  EXPECT_FALSE(ev.actions.has_value());
}

TEST(OsRule, ZombiesAboveDegradedThresholdDegrade) {
  OsSnapshot s = base_snapshot();
  s.zombies = 1001;
  OsEvaluation ev = evaluate_os(s);
  EXPECT_EQ(ev.health, Health::kDegraded);
  EXPECT_EQ(ev.reason, "too many zombie processes: 1001 (threshold: 1000)");
  ASSERT_TRUE(ev.actions.has_value());
  EXPECT_EQ(ev.actions->repair_actions,
            std::vector<RepairAction>{RepairAction::kCheckUserAppAndGpu});
}

TEST(OsRule, ZombiesAboveUnhealthyThresholdAreUnhealthy) {
  OsSnapshot s = base_snapshot();
  s.zombies = 2001;
  EXPECT_EQ(evaluate_os(s).health, Health::kUnhealthy);
  s.zombies = 1000;
  EXPECT_EQ(evaluate_os(s).health, Health::kHealthy);
}

TEST(OsRule, PersistentDStateProcessesDegrade) {
  OsSnapshot s = base_snapshot();
  s.persistence = 5;
  s.persistent_blocked = {{200, "my )proc (x", 5}, {201, "jbd2/sda1-8", 7}};
  OsEvaluation ev = evaluate_os(s);
  EXPECT_EQ(ev.health, Health::kDegraded);
  EXPECT_EQ(ev.reason,
            "2 processes blocked in D state for 5 checks: my )proc (x(200), jbd2/sda1-8(201)");
  EXPECT_FALSE(ev.actions.has_value());
}

TEST(OsRule, PersistentDStateNvidiaProcessNeedsReboot) {
  OsSnapshot s = base_snapshot();
  s.persistent_blocked = {{200, "python3", 5}, {300, "nvidia-smi", 5}};
  OsEvaluation ev = evaluate_os(s);
  EXPECT_EQ(ev.health, Health::kUnhealthy);
  ASSERT_TRUE(ev.actions.has_value());
  EXPECT_EQ(ev.actions->repair_actions, std::vector<RepairAction>{RepairAction::kRebootSystem});
}

TEST(OsRule, NvidiaMustBeThePrefix) {
  OsSnapshot s = base_snapshot();
  s.persistent_blocked = {{300, "my-nvidia-tool", 5}};
  EXPECT_EQ(evaluate_os(s).health, Health::kDegraded);
}

// --os-blocked-process-name-regexes replaces ^nvidia; an empty list escalates nothing.
TEST(OsRule, EscalatingNamesAreTheConfiguredPatterns) {
  OsSnapshot s = base_snapshot();
  s.persistent_blocked = {{300, "nvidia-smi", 5}, {301, "kworker/3:1", 5}};
  OsThresholds kworker;
  kworker.escalate_names = {"^kworker", "^lustre"};
  EXPECT_EQ(evaluate_os(s, kworker).health, Health::kUnhealthy);
  OsThresholds none;
  none.escalate_names = {};
  EXPECT_EQ(evaluate_os(s, none).health, Health::kDegraded);
  s.persistent_blocked = {{300, "nvidia-smi", 5}};
  EXPECT_EQ(evaluate_os(s, kworker).health, Health::kDegraded);
}

TEST(OsRule, RunningPidsNearPidMaxDegradeThenFail) {
  OsSnapshot s = base_snapshot();
  s.processes = 80'000;  // exactly 80 %: not above
  EXPECT_EQ(evaluate_os(s).health, Health::kHealthy);
  s.processes = 85'000;
  OsEvaluation ev = evaluate_os(s);
  EXPECT_EQ(ev.health, Health::kDegraded);
  EXPECT_EQ(ev.reason, "too many running PIDs: 85000 of 100000 (85.0%)");
  ASSERT_TRUE(ev.actions.has_value());
  EXPECT_EQ(ev.actions->description, "check/restart user applications for leaky file descriptors");
  s.processes = 96'000;
  EXPECT_EQ(evaluate_os(s).health, Health::kUnhealthy);
}

TEST(OsRule, FileHandlesMeasuredAgainstCappedFileMax) {
  OsSnapshot s = base_snapshot();
  s.info.file_max = 9223372036854775807;  // unlimited: measured against 10 million
  s.info.file_handles_allocated = 9'600'000;
  EXPECT_EQ(file_handle_threshold(s, {}), 10'000'000);
  OsEvaluation ev = evaluate_os(s);
  EXPECT_EQ(ev.health, Health::kUnhealthy);
  EXPECT_EQ(ev.reason, "too many allocated file handles: 9600000 of 10000000 (96.0%)");
  EXPECT_EQ(ev.actions->repair_actions,
            std::vector<RepairAction>{RepairAction::kCheckUserAppAndGpu});
}

TEST(OsRule, UnknownLimitsSkipUsageRules) {
  OsSnapshot s = base_snapshot();
  s.info.pid_max.reset();
  s.info.file_max.reset();
  s.processes = 1'000'000;
  EXPECT_EQ(evaluate_os(s).health, Health::kHealthy);
}

TEST(OsRule, WorstFindingWinsAndReasonsAreJoinedWorstFirst) {
  OsSnapshot s = base_snapshot();
  s.zombies = 1500;                                 // Degraded
  s.persistent_blocked = {{300, "nvidia-smi", 5}};  // Unhealthy + reboot
  s.info.file_handles_allocated = 85'000;           // Degraded
  OsEvaluation ev = evaluate_os(s);
  EXPECT_EQ(ev.health, Health::kUnhealthy);
  EXPECT_TRUE(ev.reason.starts_with("1 processes blocked in D state"));
  EXPECT_NE(ev.reason.find("; too many zombie processes"), std::string::npos);
  EXPECT_EQ(ev.actions->repair_actions, std::vector<RepairAction>{RepairAction::kRebootSystem});
}

TEST(DStateTracker, CountsConsecutiveChecksPerProcess) {
  DStateTracker t;
  std::vector<host::ProcPidStat> d = {{300, "nvidia-smi", 'D', {}}};
  EXPECT_EQ(t.update(d)[0].checks, 1);
  EXPECT_EQ(t.update(d)[0].checks, 2);
  EXPECT_EQ(t.update(d)[0].checks, 3);
}

TEST(DStateTracker, LeavingDStateResetsTheStreak) {
  DStateTracker t;
  std::vector<host::ProcPidStat> d = {{300, "nvidia-smi", 'D', {}}};
  t.update(d);
  t.update(d);
  EXPECT_TRUE(t.update({}).empty());
  EXPECT_EQ(t.update(d)[0].checks, 1);
}

TEST(DStateTracker, ReusedPidWithAnotherCommStartsOver) {
  DStateTracker t;
  t.update({{300, "nvidia-smi", 'D', {}}});
  auto r = t.update({{300, "dd", 'D', {}}});
  EXPECT_EQ(r[0].checks, 1);
}

TEST(OsReboot, DecidesNewBootsWithAMinuteOfJitter) {
  TimePoint boot = from_unix_seconds(1'700'000'000);
  EXPECT_TRUE(should_record_reboot(std::nullopt, boot));
  EXPECT_FALSE(should_record_reboot(boot, boot));
  EXPECT_FALSE(should_record_reboot(boot - 59s, boot));
  EXPECT_FALSE(should_record_reboot(boot + 1h, boot));  // an older boot than recorded
  EXPECT_TRUE(should_record_reboot(boot - 2h, boot));
}

TEST(OsReboot, EventCarriesBootTimeToTheSecond) {
  Event e = make_reboot_event(from_unix_seconds(1'704'164'645) + 700ms);
  EXPECT_EQ(e.component, "os");
  EXPECT_EQ(e.name, "reboot");
  EXPECT_EQ(e.type, EventType::kWarning);
  EXPECT_EQ(e.time, from_unix_seconds(1'704'164'645));
  EXPECT_EQ(e.message, "system reboot detected 2024-01-02T03:04:05Z");
}

TEST(OsReboot, FirstStartRecordsSameBootDoesNotNewerBootDoes) {
  BootRoot root;
  root.set_btime(1'700'000'000);
  Harness h(root.path());
  {
    OsComponent os(h.ctx);
    os.start();
  }
  ASSERT_EQ(h.log.named("reboot").size(), 1u);
  {
    OsComponent os(h.ctx);  // daemon restart, same boot
    os.start();
  }
  EXPECT_EQ(h.log.named("reboot").size(), 1u);
  root.set_btime(1'700'000'030);  // same boot, jittered
  OsComponent(h.ctx).start();
  EXPECT_EQ(h.log.named("reboot").size(), 1u);
  root.set_btime(1'700'086'400);  // a day later: the host rebooted
  OsComponent(h.ctx).start();
  auto reboots = h.log.named("reboot");
  ASSERT_EQ(reboots.size(), 2u);
  EXPECT_EQ(reboots[1].time, from_unix_seconds(1'700'086'400));
  EXPECT_EQ(reboots[1].message, "system reboot detected " + format_rfc3339(reboots[1].time));
}

TEST(OsReboot, NoBootTimeRecordsNothing) {
  Harness h(fixture("does-not-exist"));
  OsComponent(h.ctx).start();
  EXPECT_TRUE(h.log.events.empty());
}

TEST(OsComponent, CheckReportsSnapshotAndMetrics) {
  Harness h(fixture("procs"));
  OsComponent os(h.ctx);
  CheckResult r = os.check();
  ASSERT_EQ(r.states.size(), 1u);
  EXPECT_EQ(r.states[0].component, "os");
  EXPECT_EQ(r.states[0].health, Health::kHealthy);  // D state only once so far
  auto data = r.states[0].data;
  EXPECT_EQ(data["processes"], 6);
  EXPECT_EQ(data["zombie_processes"], 1);
  EXPECT_EQ(data["blocked_processes"], 2);
  EXPECT_EQ(data["processes_by_state"]["disk-sleep"], 2);
  EXPECT_EQ(data["pid_max"], 32768);
  EXPECT_EQ(data["file_handles_allocated"], 1500);
  EXPECT_FALSE(r.detail.empty());

  std::map<std::string, double> m;
  for (const MetricSample& s : h.metrics.snapshot(0)) {
    EXPECT_EQ(s.component, "os");
    m[s.name] = s.value;
  }
  EXPECT_EQ(m.at("os_zombie_processes"), 1);
  EXPECT_EQ(m.at("os_running_pids"), 6);
  EXPECT_EQ(m.at("os_blocked_processes"), 2);
  EXPECT_EQ(m.at("os_blocked_processes_persistent"), 0);
  EXPECT_EQ(m.at("os_allocated_file_handles"), 1500);
  EXPECT_DOUBLE_EQ(m.at("os_allocated_file_handles_percent"), 1.5);
  EXPECT_EQ(m.at("os_limit"), 100000);
  EXPECT_EQ(m.at("os_threshold_allocated_file_handles"), 10000000);
  EXPECT_DOUBLE_EQ(m.at("os_threshold_allocated_file_handles_percent"), 1.5);
  EXPECT_EQ(m.at("os_threshold_running_pids"), 32768);
  EXPECT_DOUBLE_EQ(m.at("os_threshold_running_pids_percent"), 100.0 * 6 / 32768);
  EXPECT_FALSE(m.contains("os_uptime_seconds"));  // the fixture has no /proc/uptime
}

// A host root without /proc/uptime and /proc/sys/fs/file-nr: those gauges are absent, not 0.
TEST(OsComponent, WhatCannotBeReadHasNoGauge) {
  BootRoot root;
  root.set_btime(1700000000);
  Harness h(root.path());
  OsComponent os(h.ctx);
  os.check();
  std::map<std::string, double> m;
  for (const MetricSample& s : h.metrics.snapshot(0)) m[s.name] = s.value;
  EXPECT_TRUE(m.contains("os_running_pids"));
  EXPECT_FALSE(m.contains("os_uptime_seconds"));
  EXPECT_FALSE(m.contains("os_allocated_file_handles"));
  EXPECT_FALSE(m.contains("os_allocated_file_handles_percent"));
  EXPECT_FALSE(m.contains("os_limit"));
  EXPECT_FALSE(m.contains("os_threshold_allocated_file_handles_percent"));
  // No /proc/sys/kernel/pid_max: no limit, and no percentage of one.
  EXPECT_FALSE(m.contains("os_threshold_running_pids"));
  EXPECT_FALSE(m.contains("os_threshold_running_pids_percent"));
}

// Read once, then unreadable: the gauges of what was read go, they do not keep the last value.
TEST(OsComponent, AValueThatCanNoLongerBeReadLosesItsGauge) {
  BootRoot root;
  root.set_btime(1700000000);
  std::filesystem::create_directories(root.path() + "/proc/sys/fs");
  std::filesystem::create_directories(root.path() + "/proc/sys/kernel");
  std::ofstream(root.path() + "/proc/sys/fs/file-nr") << "1500\t0\t100000\n";
  std::ofstream(root.path() + "/proc/sys/fs/file-max") << "100000\n";
  std::ofstream(root.path() + "/proc/sys/kernel/pid_max") << "32768\n";
  std::ofstream(root.path() + "/proc/uptime") << "350735.47 234388.90\n";
  Harness h(root.path());
  OsComponent os(h.ctx);
  os.check();
  std::map<std::string, double> m;
  for (const MetricSample& s : h.metrics.snapshot(0)) m[s.name] = s.value;
  ASSERT_EQ(m.at("os_allocated_file_handles"), 1500);
  ASSERT_EQ(m.at("os_limit"), 100000);
  ASSERT_EQ(m.at("os_threshold_running_pids"), 32768);
  ASSERT_TRUE(m.contains("os_uptime_seconds"));

  for (const char* f : {"/proc/sys/fs/file-nr", "/proc/sys/fs/file-max", "/proc/sys/kernel/pid_max",
                        "/proc/uptime"})
    std::filesystem::remove(root.path() + f);
  os.check();
  m.clear();
  for (const MetricSample& s : h.metrics.snapshot(0)) m[s.name] = s.value;
  EXPECT_TRUE(m.contains("os_running_pids"));
  for (const char* name :
       {"os_allocated_file_handles", "os_allocated_file_handles_percent", "os_limit",
        "os_threshold_allocated_file_handles_percent", "os_threshold_running_pids",
        "os_threshold_running_pids_percent", "os_uptime_seconds"})
    EXPECT_FALSE(m.contains(name)) << name;
}

// GPUd's file-handle gauges (leptonai/gpud 4a8de33a3f02e207f39e9023d67125592d599731,
// components/os/metrics.go and component.go): os_limit is file-max,
// os_allocated_file_handles_percent is of file-max, os_threshold_allocated_file_handles is the
// 10,000,000 cap (its DefaultMaxAllocatedFileHandles) and
// os_threshold_allocated_file_handles_percent is of min(cap, file-max). With file-max at 2^63-1 the
// first percent is ~0 and the second is the one that moves.
TEST(OsComponent, FileHandleGaugesUnderGpudsNamesWithAnUnboundedFileMax) {
  BootRoot root;
  root.set_btime(1700000000);
  std::filesystem::create_directories(root.path() + "/proc/sys/fs");
  std::ofstream(root.path() + "/proc/sys/fs/file-nr") << "2500000\t0\t9223372036854775807\n";
  std::ofstream(root.path() + "/proc/sys/fs/file-max") << "9223372036854775807\n";
  Harness h(root.path());
  OsComponent os(h.ctx);
  os.check();
  std::map<std::string, double> m;
  for (const MetricSample& s : h.metrics.snapshot(0)) m[s.name] = s.value;
  EXPECT_EQ(m.at("os_allocated_file_handles"), 2500000);
  EXPECT_DOUBLE_EQ(m.at("os_limit"), 9223372036854775807.0);
  EXPECT_LT(m.at("os_allocated_file_handles_percent"), 1e-9);
  EXPECT_EQ(m.at("os_threshold_allocated_file_handles"), 10000000);
  EXPECT_DOUBLE_EQ(m.at("os_threshold_allocated_file_handles_percent"), 25.0);
}

TEST(OsComponent, DStateMustPersistForFiveChecks) {
  Harness h(fixture("procs"));
  OsComponent os(h.ctx);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(os.check().health(), Health::kHealthy) << i;
  CheckResult r = os.check();
  EXPECT_EQ(r.health(), Health::kUnhealthy);
  EXPECT_EQ(r.states[0].reason,
            "2 processes blocked in D state for 5 checks: my )proc (x(200), nvidia-smi(300)");
  ASSERT_TRUE(r.states[0].suggested_actions.has_value());
  EXPECT_EQ(r.states[0].suggested_actions->repair_actions,
            std::vector<RepairAction>{RepairAction::kRebootSystem});
  os.check();
  EXPECT_EQ(h.log.named("blocked_processes_persistent").size(), 1u);  // once per episode
}

TEST(OsComponent, ScanModeFlagsDStateOnTheFirstCheck) {
  Harness h(fixture("procs"), /*scan_mode=*/true);
  OsComponent os(h.ctx);
  EXPECT_EQ(os.check().health(), Health::kUnhealthy);
}

TEST(OsComponent, SetHealthyForgetsStreaksAndKeepsRebootHistory) {
  Harness h(fixture("procs"), /*scan_mode=*/true);
  h.log.events.push_back(make_reboot_event(from_unix_seconds(1'700'000'000)));
  OsComponent os(h.ctx);
  ASSERT_TRUE(os.can_set_healthy());
  EXPECT_EQ(os.check().health(), Health::kUnhealthy);
  ASSERT_EQ(h.log.named("blocked_processes_persistent").size(), 1u);
  ASSERT_TRUE(os.set_healthy({Clock::now(), "uid:0"}).ok());
  auto persistent = h.log.named("blocked_processes_persistent");
  ASSERT_EQ(persistent.size(), 1u) << "kept for the timeline";
  EXPECT_TRUE(persistent.front().acknowledged.has_value());
  EXPECT_EQ(h.log.named("reboot").size(), 1u);
}

TEST(OsComponent, SmokeOnThisMachineHasShape) {
  Harness h("/");
  OsComponent os(h.ctx);
  CheckResult r = os.check();
  ASSERT_EQ(r.states.size(), 1u);
  auto data = r.states[0].data;
  EXPECT_GT(data["processes"].get<int64_t>(), 0);
  EXPECT_FALSE(data["kernel_version"].get<std::string>().empty());
}

TEST(OsKernelLogRule, PanicNeedsCpuLineWithinTenLines) {
  auto v =
      match_lines(os_kernel_log_rules(), {"Kernel panic - not syncing: sysrq triggered crash",
                                          "CPU: 7 PID: 31337 Comm: bash Tainted: G OE 5.15.0"});
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0].component, "os");
  EXPECT_EQ(v[0].name, "kernel_panic");
  EXPECT_EQ(v[0].message, "Kernel panic detected - CPU: 7, PID: 31337, Process: bash");
  EXPECT_EQ(v[0].extra_info["cpu"], 7);
  EXPECT_EQ(v[0].extra_info["pid"], 31337);
  EXPECT_EQ(
      match_lines(os_kernel_log_rules(),
                  {"Kernel panic - not syncing: Fatal exception", "Call Trace:", "Call Trace:",
                   "Call Trace:", "Call Trace:", "Call Trace:", "Call Trace:", "Call Trace:",
                   "Call Trace:", "Call Trace:", "Call Trace:", "CPU: 1 PID: 2 Comm: x"})
          .size(),
      0u);
  auto m = match_one(os_kernel_log_rules(), "VFS: file-max limit 1000000 reached");
  EXPECT_EQ(m.name, "vfs_file_max_limit_reached");
  EXPECT_EQ(m.extra_info["file_max"], "1000000");
}

}  // namespace
}  // namespace gpud::components
