// Rules of accelerator-nvidia-persistence-mode over hand-built snapshots (no NVML).
#include "components/nvidia/persistence_mode.h"

#include <gtest/gtest.h>

#include "components/nvidia/test_snapshot.h"

namespace gpud::components {
namespace {

using namespace testing;

TEST(PersistenceMode, DisabledOnSomeGpusIsUnhealthy) {
  auto s = identity_only_snapshot(2);
  s.gpus[0].persistence_mode = ok(true);
  s.gpus[1].persistence_mode = ok(false);
  auto v = evaluate_persistence_mode(s);
  EXPECT_EQ(v.health(), Health::kUnhealthy);
  ASSERT_EQ(v.findings.size(), 1U);
  EXPECT_EQ(v.findings[0].gpu, 1U);
  // Persistence off is the node's setup (issue #31): checked and fixed there, no reboot.
  EXPECT_EQ(v.action(), RepairAction::kCheckUserAppAndGpu);
  EXPECT_NE(v.action_description.find("nvidia-persistenced"), std::string::npos);
  EXPECT_EQ(persistence_mode_disabled(s).size(), 1U);
  EXPECT_EQ(v.gpus[1].data["persistence_mode_enabled"], false);
}

TEST(PersistenceMode, AllDisabledIsOneFinding) {
  auto s = identity_only_snapshot(8);
  for (auto& g : s.gpus) g.persistence_mode = ok(false);
  auto v = evaluate_persistence_mode(s);
  ASSERT_EQ(v.findings.size(), 1U);
  EXPECT_FALSE(v.findings[0].gpu);
  EXPECT_EQ(v.findings[0].reason, "all 8 GPU(s) disabled persistence mode");
}

TEST(PersistenceMode, NotSupportedIsNotApplicable) {
  auto v = evaluate_persistence_mode(identity_only_snapshot(1));
  EXPECT_EQ(v.health(), Health::kHealthy);
  EXPECT_EQ(v.healthy_reason, "persistence mode not supported (not applicable)");
  EXPECT_EQ(v.gpus[0].data["persistence_mode_supported"], false);
}

}  // namespace
}  // namespace gpud::components
