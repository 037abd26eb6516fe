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
  auto v = evaluate_pcie(s, {});
  EXPECT_EQ(v.health(), Health::kDegraded);
  EXPECT_EQ(v.action(), RepairAction::kHardwareInspection);
  ASSERT_EQ(v.findings.size(), 1U);
  EXPECT_EQ(v.findings[0].gpu, 0U);
  EXPECT_EQ(v.gpus[0].data["link_width_current"], 8);
  EXPECT_EQ(v.gpus[0].data["link_width_max"], 16);
}

TEST(Pcie, LowGenOnlyMattersWhenBusy) {
  auto s = identity_only_snapshot(1);
  s.gpus[0].pcie = link(1, 5, 16, 16, 0);
  auto idle = evaluate_pcie(s, {});
  EXPECT_EQ(idle.health(), Health::kHealthy);
  EXPECT_EQ(idle.gpus[0].data["link_gen_below_max_at_idle"], true);
  s.gpus[0].utilization = ok(nvml::Utilization{50, 10});
  EXPECT_EQ(evaluate_pcie(s, {}).health(), Health::kDegraded);
}

TEST(Pcie, ReplayGrowthAboveBudgetIsDegraded) {
  auto s = identity_only_snapshot(1);
  s.gpus[0].pcie = link(5, 5, 16, 16, 100);
  std::map<std::string, PcieReplaySample> prev = {
      {"GPU-0", {50, s.time - std::chrono::seconds(60)}}};
  auto v = evaluate_pcie(s, prev);
  EXPECT_EQ(v.health(), Health::kDegraded);
  EXPECT_EQ(v.gpus[0].data["replay_delta"], 50);
  EXPECT_EQ(v.gpus[0].data["replay_budget"], 31);
  prev["GPU-0"].counter = 80;  // 20 <= 31
  EXPECT_EQ(evaluate_pcie(s, prev).health(), Health::kHealthy);
}

}  // namespace
}  // namespace gpud::components
