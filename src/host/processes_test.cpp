#include "host/processes.h"

#include <gtest/gtest.h>

namespace gpud::host {
namespace {

std::string fixture(std::string_view sub) {
  return std::string(GPUD_SOURCE_DIR) + "/testing/fixtures/host-os/" + std::string(sub);
}

TEST(ProcessState, NamesLikePs) {
  EXPECT_EQ(process_state_name('D'), "disk-sleep");
  EXPECT_EQ(process_state_name('Z'), "zombie");
  EXPECT_EQ(process_state_name('?'), "unknown");
}

TEST(ProcessScan, CountsByStateAndSkipsVanishedAndNonNumeric) {
  HostFs fs(fixture("procs"));
  ProcessScan scan = scan_processes(fs);
  // pid 500 has no stat (vanished); "self" and "sys" are not pids.
  ASSERT_EQ(scan.processes.size(), 6u);
  EXPECT_EQ(scan.processes.front().pid, 1);
  EXPECT_EQ(scan.count('Z'), 1);
  EXPECT_EQ(scan.count('D'), 2);
  EXPECT_EQ(scan.count('R'), 1);
  EXPECT_EQ(scan.count('I'), 1);
  EXPECT_EQ(scan.count('T'), 0);
  EXPECT_EQ(scan.processes[2], (ProcPidStat{200, "my )proc (x", 'D', 600}));
  EXPECT_EQ(scan.processes[3], (ProcPidStat{300, "nvidia-smi", 'D', 700}));
}

TEST(ProcessScan, MissingProcIsEmpty) {
  HostFs fs(fixture("does-not-exist"));
  EXPECT_TRUE(scan_processes(fs).processes.empty());
}

TEST(ProcessScan, SmokeOnThisMachineFindsItself) {
  HostFs fs("/");
  ProcessScan scan = scan_processes(fs);
  EXPECT_FALSE(scan.processes.empty());
  for (const auto& p : scan.processes) EXPECT_GT(p.pid, 0);
}

}  // namespace
}  // namespace gpud::host
