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
  EXPECT_EQ(v.result.health(), Health::kUnhealthy);
  EXPECT_EQ(v.result.states[0].reason, "GPU-1 persistence mode supported but not enabled");
  ASSERT_EQ(v.disabled.size(), 1U);
  EXPECT_FALSE(v.result.states[0].suggested_actions.has_value());
}

TEST(PersistenceMode, AllDisabledSaysAll) {
  auto s = identity_only_snapshot(8);
  for (auto& g : s.gpus) g.persistence_mode = ok(false);
  EXPECT_EQ(evaluate_persistence_mode(s).result.states[0].reason,
            "all 8 GPU(s) disabled persistence mode");
}

TEST(PersistenceMode, NotSupportedIsNotApplicable) {
  auto v = evaluate_persistence_mode(identity_only_snapshot(1));
  EXPECT_EQ(v.result.health(), Health::kHealthy);
  EXPECT_NE(v.result.states[0].reason.find("not applicable"), std::string::npos);
  EXPECT_TRUE(v.result.states[0].extra_info.count("data"));
}

}  // namespace
}  // namespace gpud::components
