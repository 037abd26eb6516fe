// Rules of accelerator-nvidia-pcie over hand-built snapshots (no NVML).
#include "components/nvidia/pcie.h"

#include <gtest/gtest.h>

#include "components/nvidia/test_snapshot.h"

namespace gpud::components {
namespace {

using namespace testing;

TEST(Pcie, ReplayBudgetPerLane) {
  using std::chrono::seconds;
  EXPECT_EQ(pcie_replay_budget(5, 16, seconds(60)), 31U);
  EXPECT_EQ(pcie_replay_budget(4, 16, seconds(60)), 16U);
  EXPECT_EQ(pcie_replay_budget(9, 1, seconds(60)), 4U);  // capped at Gen6
}

nvml::PcieLink link(uint32_t gen, uint32_t max_gen, uint32_t width, uint32_t max_width,
                    uint32_t replay) {
  nvml::PcieLink p;
  p.gen_current = ok(gen);
  p.gen_max = ok(max_gen);
  p.width_current = ok(width);
  p.width_max = ok(max_width);
  p.replay_counter = ok(replay);
  return p;
}

TEST(Pcie, NarrowLinkIsDegraded) {
  auto s = identity_only_snapshot(1);
  s.gpus[0].pcie = link(5, 5, 8, 16, 0);
  auto r = evaluate_pcie(s, {});
  EXPECT_EQ(r.health(), Health::kDegraded);
  EXPECT_EQ(r.states[0].reason, "GPU 0 (0000:00:00.0): PCIe link width x8 below max x16");
}

TEST(Pcie, LowGenOnlyMattersWhenBusy) {
  auto s = identity_only_snapshot(1);
  s.gpus[0].pcie = link(1, 5, 16, 16, 0);
  EXPECT_EQ(evaluate_pcie(s, {}).health(), Health::kHealthy);
  s.gpus[0].utilization = ok(nvml::Utilization{50, 10});
  EXPECT_EQ(evaluate_pcie(s, {}).health(), Health::kDegraded);
}

TEST(Pcie, ReplayGrowthAboveBudgetIsDegraded) {
  auto s = identity_only_snapshot(1);
  s.gpus[0].pcie = link(5, 5, 16, 16, 100);
  std::map<std::string, PcieReplaySample> prev = {
      {"GPU-0", {50, s.time - std::chrono::seconds(60)}}};
  auto r = evaluate_pcie(s, prev);
  EXPECT_EQ(r.health(), Health::kDegraded);
  EXPECT_NE(r.states[0].reason.find("grew by 50"), std::string::npos);
  prev["GPU-0"].counter = 80;  // 20 <= 31
  EXPECT_EQ(evaluate_pcie(s, prev).health(), Health::kHealthy);
}

}  // namespace
}  // namespace gpud::components
