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
  auto v = evaluate_gsp_firmware_mode(s);
  EXPECT_EQ(v.health(), Health::kHealthy);
  EXPECT_EQ(v.healthy_reason, "GSP firmware enabled on 1/2 GPU(s)");
  EXPECT_EQ(v.gpus[0].data["version"], "550.54.15");
  EXPECT_EQ(v.gpus[0].cells,
            (std::vector<std::string>{"GPU-0", "enabled", "not supported", "550.54.15"}));
  EXPECT_EQ(evaluate_gsp_firmware_mode(identity_only_snapshot(1)).healthy_reason,
            "GSP firmware mode not supported (not applicable)");
}

TEST(GspFirmwareMode, NvmlErrorIsUnhealthy) {
  auto s = identity_only_snapshot(2);
  s.gpus[1].gsp.enabled = errored<bool>("Unknown Error");
  auto v = evaluate_gsp_firmware_mode(s);
  EXPECT_EQ(v.health(), Health::kUnhealthy);
  ASSERT_EQ(v.findings.size(), 1U);
  EXPECT_EQ(v.findings[0].gpu, 1U);
  EXPECT_FALSE(v.gpus[1].data.contains("enabled"));
}

}  // namespace
}  // namespace gpud::components
