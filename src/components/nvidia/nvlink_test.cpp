// Rules of accelerator-nvidia-nvlink over hand-built snapshots (no NVML).
#include "components/nvidia/nvlink.h"

#include <gtest/gtest.h>

#include "components/kernel_log_test_util.h"
#include "components/nvidia/test_snapshot.h"

namespace gpud::components {
namespace {

using namespace testing;

TEST(Nvlink, InactiveLinkWithoutExpectationIsDegraded) {
  auto s = identity_only_snapshot(2);
  s.gpus[0].nvlinks = ok(nvlinks(18, {3, 7}));
  s.gpus[1].nvlinks = ok(nvlinks(18));
  auto r = evaluate_nvlink(s, 0, {});
  EXPECT_EQ(r.health(), Health::kDegraded);
  EXPECT_EQ(r.states[0].reason, "GPU 0 (0000:00:00.0): link(s) 3, 7 inactive");
}

TEST(Nvlink, ExpectationViolatedIsUnhealthy) {
  auto s = identity_only_snapshot(2);
  s.gpus[0].nvlinks = ok(nvlinks(18, {3}));
  s.gpus[1].nvlinks = ok(nvlinks(18));
  auto r = evaluate_nvlink(s, 2, {});
  EXPECT_EQ(r.health(), Health::kUnhealthy);
  EXPECT_EQ(r.states[0].reason.rfind(
                "nvlink threshold violated: require >=2 GPUs with all links active; got 1", 0),
            0U);
  EXPECT_EQ(evaluate_nvlink(s, 1, {}).health(), Health::kHealthy);
}

TEST(Nvlink, NotSupportedIsNotApplicable) {
  auto r = evaluate_nvlink(identity_only_snapshot(1), 0, {});
  EXPECT_EQ(r.health(), Health::kHealthy);
  EXPECT_EQ(r.states[0].reason, "NVLink not supported (not applicable)");
}

std::vector<nvml::P2PPair> pairs(int gpus, int status) {
  std::vector<nvml::P2PPair> out;
  for (int a = 0; a < gpus; ++a)
    for (int b = a + 1; b < gpus; ++b) {
      nvml::P2PPair p;
      p.a = static_cast<unsigned>(a);
      p.b = static_cast<unsigned>(b);
      p.status = ok(status);
      out.push_back(p);
    }
  return out;
}

TEST(Nvlink, NoP2PPairOnAnNvlinkSystemIsUnhealthy) {
  auto s = identity_only_snapshot(4);
  for (auto& g : s.gpus) g.nvlinks = ok(nvlinks(18));
  s.nvlink_p2p = pairs(4, nvml::NVML_P2P_STATUS_OK);
  auto r = evaluate_nvlink(s, 0, {});
  EXPECT_EQ(r.health(), Health::kHealthy);
  EXPECT_NE(r.detail.find("3/3"), std::string::npos) << r.detail;
  EXPECT_NE(r.states[0].extra_info.at("data").find("\"pairs_ok\":6"), std::string::npos);

  s.nvlink_p2p = pairs(4, nvml::NVML_P2P_STATUS_NOT_SUPPORTED);
  r = evaluate_nvlink(s, 0, {});
  EXPECT_EQ(r.health(), Health::kUnhealthy);
  EXPECT_EQ(r.states[0].reason,
            "no GPU pairs report NVLink P2P connectivity on 4-GPU NVLink-capable system");
  EXPECT_FALSE(r.states[0].suggested_actions);  // an expected refusal, links all active
  // An unknown status, or an inactive link, asks for a reboot.
  s.nvlink_p2p = pairs(4, nvml::NVML_P2P_STATUS_UNKNOWN);
  r = evaluate_nvlink(s, 0, {});
  ASSERT_TRUE(r.states[0].suggested_actions);
  EXPECT_EQ(r.states[0].suggested_actions->repair_actions[0], RepairAction::kRebootSystem);
  s.nvlink_p2p = pairs(4, nvml::NVML_P2P_STATUS_NOT_SUPPORTED);
  s.gpus[2].nvlinks = ok(nvlinks(18, {5}));
  EXPECT_TRUE(evaluate_nvlink(s, 0, {}).states[0].suggested_actions);

  // One good pair is enough; a pair not probed (error) leaves the rule out.
  s.gpus[2].nvlinks = ok(nvlinks(18));
  s.nvlink_p2p[3].status = ok(nvml::NVML_P2P_STATUS_OK);
  EXPECT_EQ(evaluate_nvlink(s, 0, {}).health(), Health::kHealthy);
  s.nvlink_p2p = pairs(4, nvml::NVML_P2P_STATUS_NOT_SUPPORTED);
  s.nvlink_p2p[0].status = errored<int>();
  EXPECT_EQ(evaluate_nvlink(s, 0, {}).health(), Health::kHealthy);
  // A product without NVLink fabric (PCIe card): no expectation.
  auto pcie = identity_only_snapshot(2, "NVIDIA H100 PCIe");
  for (auto& g : pcie.gpus) g.nvlinks = ok(nvlinks(18));
  pcie.nvlink_p2p = pairs(2, nvml::NVML_P2P_STATUS_NOT_SUPPORTED);
  EXPECT_EQ(evaluate_nvlink(pcie, 0, {}).health(), Health::kHealthy);
}

TEST(Nvlink, PostRxDetectFailureNeedsReboot) {
  auto s = identity_only_snapshot(1);
  s.gpus[0].nvlinks = ok(nvlinks(18));
  Event e;
  e.name = std::string(kNvlinkPostRxDetectEvent);
  e.message = "boot ID: x";
  auto r = evaluate_nvlink(s, 0, {e});
  EXPECT_EQ(r.health(), Health::kUnhealthy);
  ASSERT_TRUE(r.states[0].suggested_actions);
  EXPECT_EQ(r.states[0].suggested_actions->repair_actions[0], RepairAction::kRebootSystem);
}

TEST(NvlinkKernelLogRule, PostRxDetectFailures) {
  auto m =
      match_one(nvlink_kernel_log_rules(),
                "NVRM: knvlinkUpdatePostRxDetectLinkMask_IMPL: Failed to update Rx Detect Link "
                "mask!");
  EXPECT_EQ(m.component, "accelerator-nvidia-nvlink");
  EXPECT_EQ(m.name, "nvlink_post_rx_detect_failure");
  EXPECT_EQ(
      match_one(nvlink_kernel_log_rules(),
                "NVRM: knvlinkDiscoverPostRxDetLinks_GH100: Getting peer0's postRxDetLinkMask "
                "failed!")
          .name,
      "nvlink_post_rx_detect_failure");
}

}  // namespace
}  // namespace gpud::components
