// The kernel-log rules of the host components: disk (reboot history), nfs (hangs), pci (AER).
#include <gtest/gtest.h>

#include "components/host/disk.h"
#include "components/host/nfs.h"
#include "components/host/pci.h"
#include "components/kernel_log_support.h"

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

TEST(NfsRule, ServerNotRespondingWithoutOkIsAHang) {
  auto v =
      evaluate_nfs({ev("nfs", "nfs_server_not_responding", 1, "", {{"server", "10.0.0.5"}})}, {});
  EXPECT_EQ(v.health, Health::kUnhealthy);
  EXPECT_NE(v.reason.find("NFS hang detected"), std::string::npos);
  EXPECT_NE(v.reason.find("10.0.0.5"), std::string::npos);
  EXPECT_EQ(v.actions->repair_actions, std::vector{RepairAction::kRebootSystem});
}

TEST(NfsRule, ServerOkAfterwardsIsNoHang) {
  EXPECT_EQ(evaluate_nfs({ev("nfs", "nfs_server_not_responding", 1, "", {{"server", "a"}}),
                          ev("nfs", "nfs_server_ok", 2, "", {{"server", "a"}})},
                         {})
                .health,
            Health::kHealthy);
}

TEST(NfsRule, OneWritebackHintIsNotEnoughTwoAre) {
  EXPECT_EQ(evaluate_nfs({ev("nfs", "nfs_writeback_hang", 1)}, {}).health, Health::kHealthy);
  EXPECT_EQ(
      evaluate_nfs({ev("nfs", "nfs_writeback_hang", 1), ev("nfs", "nfs_writeback_hang", 2)}, {})
          .health,
      Health::kUnhealthy);
}

TEST(NfsRule, EventsBeforeTheLatestRebootDoNotCount) {
  EXPECT_EQ(evaluate_nfs({ev("nfs", "nfs_lock_reclaim_failed", 1)}, {at(2)}).health,
            Health::kHealthy);
}

TEST(NfsRule, HangsAcrossRebootsNeedInspection) {
  auto v = evaluate_nfs(
      {ev("nfs", "nfs_lock_reclaim_failed", 2), ev("nfs", "nfs_lock_reclaim_failed", 4)},
      {at(1), at(3)});
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

TEST(KernelLogEvents, SummaryCountsByName) {
  EXPECT_EQ(summarize_events({}), "");
  auto s = summarize_events({ev("memory", "OOM", 1, "first"), ev("memory", "OOM", 2, "second")});
  EXPECT_EQ(s, "2 kernel-log events (2 OOM), latest: second");
  CheckResult r = single_state("memory", Health::kHealthy, "ok");
  append_event_summary(r, {ev("memory", "OOM", 1, "victim python3")});
  EXPECT_EQ(r.health(), Health::kHealthy);
  EXPECT_NE(r.states[0].reason.find("victim python3"), std::string::npos);
  EXPECT_TRUE(r.states[0].extra_info.contains("kernel_log_events"));
}

}  // namespace
}  // namespace gpud::components
