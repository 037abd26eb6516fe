// The kernel-log rules of the host components: disk (reboot history), nfs (hangs), pci (AER), os
// (network devices that cannot be freed).
#include <gtest/gtest.h>

#include "components/host/disk.h"
#include "components/host/nfs.h"
#include "components/host/os.h"
#include "components/host/pci.h"
#include "components/kernel_log_support.h"
#include "components/kernel_log_test_util.h"

namespace gpud::components {
namespace {

const TimePoint kT0 = Clock::from_time_t(1'700'000'000);
TimePoint at(int h) { return kT0 + std::chrono::hours(h); }

Event ev(std::string component, std::string name, int h, std::string message = "",
         nlohmann::json extra = nlohmann::json::object()) {
  return {std::move(component),
          at(h),
          std::move(name),
          EventType::kWarning,
          message.empty() ? "msg" : std::move(message),
          std::move(extra)};
}

TEST(DiskKernelLog, ErrorWithoutRebootIsUnhealthyWithReboot) {
  auto v = evaluate_disk_events(
      {ev("disk", "buffer_io_error", 1, "buffer I/O error on device (sda)")}, {});
  EXPECT_EQ(v.health, Health::kUnhealthy);
  EXPECT_NE(v.reason.find("buffer I/O error on device (sda)"), std::string::npos) << v.reason;
  EXPECT_EQ(v.actions->repair_actions, std::vector{RepairAction::kRebootSystem});
}

TEST(DiskKernelLog, RebootAfterTheErrorResolvesIt) {
  EXPECT_EQ(evaluate_disk_events({ev("disk", "buffer_io_error", 1)}, {at(2)}).health,
            Health::kHealthy);
}

TEST(DiskKernelLog, ErrorsAcrossTwoRebootsNeedInspection) {
  auto v = evaluate_disk_events(
      {ev("disk", "nvme_controller_timeout", 2), ev("disk", "nvme_controller_timeout", 4)},
      {at(1), at(3)});
  EXPECT_EQ(v.actions->repair_actions, std::vector{RepairAction::kHardwareInspection});
}

TEST(DiskKernelLog, MergedIntoTheSnapshotRule) {
  CheckResult r = single_state("disk", Health::kHealthy, "disk usage ok");
  merge_verdict(r, evaluate_disk_events({ev("disk", "filesystem_read_only", 1)}, {}));
  EXPECT_EQ(r.health(), Health::kUnhealthy);
  EXPECT_NE(r.states[0].reason.find("disk usage ok"), std::string::npos);
  EXPECT_TRUE(r.states[0].suggested_actions);
}

// An NFS event `after` the base time, for `server`.
Event nfs_at(std::string name, std::chrono::seconds after, std::string server = "10.0.0.5",
             bool injected = false) {
  Event e = ev("nfs", std::move(name), 0, "", {{"server", std::move(server)}});
  e.time = kT0 + after;
  if (injected) e.extra_info["injected"] = true;
  return e;
}

using std::chrono::minutes;
using std::chrono::seconds;

TEST(NfsRule, OneNotRespondingIsDegradedUntilFiveMinutesPassWithoutOk) {
  const std::vector<Event> events = {nfs_at("nfs_server_not_responding", seconds(0))};
  auto v = evaluate_nfs(events, {}, kT0 + minutes(4));
  EXPECT_EQ(v.health, Health::kDegraded);
  EXPECT_NE(v.reason.find("server 10.0.0.5 not responding for 240s, no OK yet"), std::string::npos)
      << v.reason;
  EXPECT_FALSE(v.actions);
  v = evaluate_nfs(events, {}, kT0 + minutes(5));
  EXPECT_EQ(v.health, Health::kUnhealthy);
  EXPECT_NE(v.reason.find("NFS hang detected: server 10.0.0.5 not responding, no OK within 5 "
                          "minutes"),
            std::string::npos)
      << v.reason;
  EXPECT_EQ(v.actions->repair_actions, std::vector{RepairAction::kRebootSystem});
}

TEST(NfsRule, NotRespondingTwiceWithoutOkIsAHangAtOnce) {
  auto v = evaluate_nfs({nfs_at("nfs_server_not_responding", seconds(0)),
                         nfs_at("nfs_server_not_responding", seconds(30))},
                        {}, kT0 + minutes(1));
  EXPECT_EQ(v.health, Health::kUnhealthy);
  EXPECT_NE(v.reason.find("server 10.0.0.5 not responding (2 times, no OK)"), std::string::npos)
      << v.reason;
}

TEST(NfsRule, OkWithinFiveMinutesIsNoHangAndStartsAfresh) {
  EXPECT_EQ(evaluate_nfs({nfs_at("nfs_server_not_responding", seconds(0)),
                          nfs_at("nfs_server_ok", minutes(4))},
                         {}, kT0 + minutes(30))
                .health,
            Health::kHealthy);
  // An OK in the same second answers the line before it.
  EXPECT_EQ(evaluate_nfs({nfs_at("nfs_server_ok", seconds(0)),
                          nfs_at("nfs_server_not_responding", seconds(0))},
                         {}, kT0 + minutes(30))
                .health,
            Health::kHealthy);
  // After an OK, one new "not responding" is a single one again, and other servers count apart.
  auto v = evaluate_nfs(
      {nfs_at("nfs_server_not_responding", seconds(0)), nfs_at("nfs_server_ok", seconds(20)),
       nfs_at("nfs_server_not_responding", seconds(40)),
       nfs_at("nfs_server_ok", seconds(50), "10.0.0.6")},
      {}, kT0 + minutes(1));
  EXPECT_EQ(v.health, Health::kDegraded) << v.reason;
}

TEST(NfsRule, InjectedNotRespondingSaysSoInTheReason) {
  auto v = evaluate_nfs({nfs_at("nfs_server_not_responding", seconds(0), "10.0.0.5", true)}, {},
                        kT0 + minutes(10));
  EXPECT_EQ(v.health, Health::kUnhealthy);
  EXPECT_NE(v.reason.find("(injected)"), std::string::npos) << v.reason;
}

TEST(NfsRule, OneWritebackHintIsNotEnoughTwoAre) {
  EXPECT_EQ(evaluate_nfs({ev("nfs", "nfs_writeback_hang", 1)}, {}, at(3)).health, Health::kHealthy);
  EXPECT_EQ(evaluate_nfs({ev("nfs", "nfs_writeback_hang", 1), ev("nfs", "nfs_writeback_hang", 2)},
                         {}, at(3))
                .health,
            Health::kUnhealthy);
}

TEST(NfsRule, EventsBeforeTheLatestRebootDoNotCount) {
  EXPECT_EQ(evaluate_nfs({ev("nfs", "nfs_lock_reclaim_failed", 1)}, {at(2)}, at(3)).health,
            Health::kHealthy);
  EXPECT_EQ(evaluate_nfs({nfs_at("nfs_server_not_responding", seconds(0)),
                          nfs_at("nfs_server_not_responding", seconds(1))},
                         {at(2)}, at(3))
                .health,
            Health::kHealthy);
}

TEST(NfsRule, HangsAcrossRebootsNeedInspection) {
  auto v = evaluate_nfs(
      {ev("nfs", "nfs_lock_reclaim_failed", 2), ev("nfs", "nfs_lock_reclaim_failed", 4)},
      {at(1), at(3)}, at(5));
  EXPECT_EQ(v.actions->repair_actions, std::vector{RepairAction::kHardwareInspection});
}

TEST(PciRule, FatalAerIsUnhealthyNonFatalDegradedCorrectedHealthy) {
  EXPECT_EQ(evaluate_pci({ev("pci", "pcie_aer_uncorrected_fatal", 1)}, {}).health,
            Health::kUnhealthy);
  EXPECT_EQ(evaluate_pci({ev("pci", "pcie_aer_uncorrected_nonfatal", 1)}, {}).health,
            Health::kDegraded);
  auto v = evaluate_pci({ev("pci", "pcie_aer_corrected", 1)}, {});
  EXPECT_EQ(v.health, Health::kHealthy);
  EXPECT_NE(v.reason.find("1 corrected"), std::string::npos);
}

TEST(PciRule, RebootClearsUncorrectedErrors) {
  EXPECT_EQ(evaluate_pci({ev("pci", "pcie_aer_uncorrected_fatal", 1)}, {at(2)}).health,
            Health::kHealthy);
}

// A failed recovery leaves the device below the port unusable until a reboot; a link reset is a
// step of a recovery (that worked, unless a failure follows): counted, not a fault.
TEST(PciRule, FailedRecoveryIsUnhealthyUntilARebootAndALinkResetIsCounted) {
  auto v = evaluate_pci(
      {ev("pci", "pcie_link_reset", 1),
       ev("pci", "pcie_aer_recovery_failed", 1, "PCIe error recovery failed below 0000:00:1c.2")},
      {});
  EXPECT_EQ(v.health, Health::kUnhealthy);
  EXPECT_NE(v.reason.find("1 failed PCIe error recoveries, latest: PCIe error recovery failed "
                          "below 0000:00:1c.2"),
            std::string::npos)
      << v.reason;
  ASSERT_TRUE(v.actions);
  EXPECT_EQ(v.actions->repair_actions, std::vector{RepairAction::kRebootSystem});
  EXPECT_EQ(evaluate_pci({ev("pci", "pcie_aer_recovery_failed", 1)}, {at(2)}).health,
            Health::kHealthy);
  v = evaluate_pci({ev("pci", "pcie_link_reset", 1)}, {});
  EXPECT_EQ(v.health, Health::kHealthy);
  EXPECT_NE(v.reason.find("1 PCIe link resets"), std::string::npos) << v.reason;
}

// A device whose references leaked stays until a reboot: Degraded with REBOOT_SYSTEM, resolved by
// the next reboot; a stuck transmit queue (the driver resets it) is only listed.
TEST(OsKernelLog, NetdevRefcountLeakNeedsARebootAndTheRebootEndsIt) {
  auto v = evaluate_netdev_refcount(
      {ev("os", kNetdevRefcountLeakEvent, 2, "network device lo cannot be freed"),
       ev("os", kNetdevRefcountLeakEvent, 3, "network device veth1 cannot be freed"),
       ev("os", kNetdevRefcountLeakEvent, 0, "before the reboot"),
       ev("os", kNetdevWatchdogEvent, 3)},
      {at(1)});
  EXPECT_EQ(v.health, Health::kDegraded);
  EXPECT_EQ(v.reason, "network device veth1 cannot be freed (2x since the last reboot)");
  ASSERT_TRUE(v.actions);
  EXPECT_EQ(v.actions->repair_actions, std::vector{RepairAction::kRebootSystem});
  EXPECT_EQ(
      evaluate_netdev_refcount({ev("os", kNetdevRefcountLeakEvent, 2)}, {at(1), at(3)}).health,
      Health::kHealthy);
  EXPECT_EQ(evaluate_netdev_refcount({ev("os", kNetdevWatchdogEvent, 2)}, {}).health,
            Health::kHealthy);
}

TEST(KernelLogEvents, SummaryCountsByName) {
  EXPECT_EQ(summarize_events({}), "");
  auto s = summarize_events({ev("memory", "OOM", 1, "first"), ev("memory", "OOM", 2, "second")});
  EXPECT_EQ(s, "2 kernel-log events (2 OOM), latest: second");
  CheckResult r = single_state("memory", Health::kHealthy, "ok");
  append_event_summary(r, summary_of({ev("memory", "OOM", 1, "victim python3")}));
  EXPECT_EQ(r.health(), Health::kHealthy);
  EXPECT_NE(r.states[0].reason.find("victim python3"), std::string::npos);
  EXPECT_TRUE(r.states[0].extra_info.contains("kernel_log_events"));
}

TEST(DiskKernelLogRule, AllFamilies) {
  struct Case {
    const char* line;
    const char* name;
  } cases[] = {
      {"md/raid1:md0: Disk failure on sdb1, disabling device.", nullptr},
      {"md/raid10:md127: Disk failure on nvme1n1 detected, failing array", "raid_array_failure"},
      {"EXT4-fs (nvme0n1p2): Remounting filesystem read-only", "filesystem_read_only"},
      {"block nvme0n1: no available path - failing I/O", "nvme_path_failure"},
      {"nvme nvme0: I/O 123 QID 4 timeout, reset controller", "nvme_controller_timeout"},
      {"nvme nvme1: Disabling device after reset failure: -19", "nvme_device_disabled"},
      {"attempt to access beyond end of device", "beyond_end_of_device"},
      {"Buffer I/O error on dev nvme0n1p1, logical block 0, async page read", "buffer_io_error"},
      {"EXT4-fs error (device sda1): I/O error while writing superblock", "superblock_write_error"},
  };
  for (const auto& c : cases) {
    auto v = match_lines(disk_kernel_log_rules(), {c.line});
    if (c.name == nullptr) {
      EXPECT_TRUE(v.empty()) << c.line;
      continue;
    }
    ASSERT_EQ(v.size(), 1u) << c.line;
    EXPECT_EQ(v[0].component, "disk");
    EXPECT_EQ(v[0].name, c.name);
  }
  EXPECT_EQ(
      match_one(disk_kernel_log_rules(), "EXT4-fs (nvme0n1p2): Remounting filesystem read-only")
          .extra_info["device"],
      "nvme0n1p2");
}

TEST(NfsKernelLogRule, All) {
  EXPECT_EQ(
      match_one(nfs_kernel_log_rules(), "nfs: server 10.0.0.5 not responding, still trying").name,
      "nfs_server_not_responding");
  EXPECT_EQ(match_one(nfs_kernel_log_rules(), "nfs: server 10.0.0.5 OK").name, "nfs_server_ok");
  EXPECT_EQ(
      match_one(nfs_kernel_log_rules(), "NFS: nfs4_reclaim_open_state: Lock reclaim failed!").name,
      "nfs_lock_reclaim_failed");
  EXPECT_EQ(match_one(nfs_kernel_log_rules(), " nfs_wb_all+0x5c/0x120 [nfs]").name,
            "nfs_writeback_hang");
  EXPECT_TRUE(match_lines(nfs_kernel_log_rules(), {"xnfs_wb_all+0x5c"}).empty());
}

TEST(PciKernelLogRule, SeverityAndDevice) {
  auto m = match_one(pci_kernel_log_rules(),
                     "pcieport 0000:00:03.1: AER: Corrected error received: 0000:3b:00.0");
  EXPECT_EQ(m.component, "pci");
  EXPECT_EQ(m.type, EventType::kWarning);
  EXPECT_EQ(m.extra_info["pci_bus_id"], "0000:3b:00.0");
  m = match_one(pci_kernel_log_rules(),
                "pcieport 0000:80:01.1: AER: Uncorrected (Non-Fatal) error received: 0000:86:00.0");
  EXPECT_EQ(m.type, EventType::kCritical);
  m = match_one(
      pci_kernel_log_rules(),
      "pcieport 0000:80:01.1: AER: Uncorrectable (Fatal) error message received from 0000:86:00.0");
  EXPECT_EQ(m.type, EventType::kFatal);
  EXPECT_TRUE(match_lines(pci_kernel_log_rules(), {"AER: enabled with IRQ 24"}).empty());
}

}  // namespace
}  // namespace gpud::components
