// Rules of accelerator-nvidia-gsp-firmware-mode over hand-built snapshots (no NVML).
#include "components/nvidia/gsp_firmware_mode.h"

#include <gtest/gtest.h>

#include "components/nvidia/test_snapshot.h"

namespace gpud::components {
namespace {

using namespace testing;

TEST(GspFirmwareMode, ReportsVersionAndNotSupported) {
  auto s = identity_only_snapshot(2);
  s.gpus[0].gsp.enabled = ok(true);
  s.gpus[0].gsp.version = ok(std::string("550.54.15"));
  auto r = evaluate_gsp_firmware_mode(s);
  EXPECT_EQ(r.health(), Health::kHealthy);
  EXPECT_EQ(r.states[0].reason, "GSP firmware enabled on 1/2 GPU(s)");
  EXPECT_NE(r.detail.find("550.54.15"), std::string::npos);
  EXPECT_EQ(evaluate_gsp_firmware_mode(identity_only_snapshot(1)).states[0].reason,
            "GSP firmware mode not supported (not applicable)");
}

}  // namespace
}  // namespace gpud::components
