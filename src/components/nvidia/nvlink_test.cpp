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
  auto v = evaluate_nvlink(s, 0, {});
  EXPECT_EQ(v.health(), Health::kDegraded);
  ASSERT_EQ(v.findings.size(), 1U);
  EXPECT_EQ(v.findings[0].gpu, 0U);
  EXPECT_EQ(v.gpus[0].cells[2], "3, 7");
  EXPECT_EQ(v.gpus[0].data["all_feature_enabled"], false);
  EXPECT_EQ(v.data["gpus_with_all_links_feature_enabled"], 1);
}

TEST(Nvlink, ExpectationViolatedIsUnhealthy) {
  auto s = identity_only_snapshot(2);
  s.gpus[0].nvlinks = ok(nvlinks(18, {3}));
  s.gpus[1].nvlinks = ok(nvlinks(18));
  auto v = evaluate_nvlink(s, 2, {});
  EXPECT_EQ(v.health(), Health::kUnhealthy);
  ASSERT_EQ(v.findings.size(), 1U);
  EXPECT_FALSE(v.findings[0].gpu);  // about the system
  EXPECT_EQ(v.data["expected_gpus_with_all_links_feature_enabled"], 2);
  EXPECT_EQ(evaluate_nvlink(s, 1, {}).health(), Health::kHealthy);
}

TEST(Nvlink, NotSupportedIsNotApplicable) {
  auto v = evaluate_nvlink(identity_only_snapshot(1), 0, {});
  EXPECT_EQ(v.health(), Health::kHealthy);
  EXPECT_EQ(v.healthy_reason, "NVLink not supported (not applicable)");
  EXPECT_EQ(v.gpus[0].data["supported"], false);
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
  auto v = evaluate_nvlink(s, 0, {});
  EXPECT_EQ(v.health(), Health::kHealthy);
  EXPECT_EQ(v.gpus[0].cells.back(), "3/3");
  EXPECT_EQ(v.gpus[0].data["p2p_ok_peers"], 3);
  EXPECT_EQ(v.data["p2p"]["pairs_ok"], 6);

  s.nvlink_p2p = pairs(4, nvml::NVML_P2P_STATUS_NOT_SUPPORTED);
  v = evaluate_nvlink(s, 0, {});
  EXPECT_EQ(v.health(), Health::kUnhealthy);
  EXPECT_EQ(v.data["p2p"]["pairs_ok"], 0);
  EXPECT_FALSE(v.action());  // an expected refusal, links all active
  // An unknown status, or an inactive link, asks for a reboot.
  s.nvlink_p2p = pairs(4, nvml::NVML_P2P_STATUS_UNKNOWN);
  EXPECT_EQ(evaluate_nvlink(s, 0, {}).action(), RepairAction::kRebootSystem);
  s.nvlink_p2p = pairs(4, nvml::NVML_P2P_STATUS_NOT_SUPPORTED);
  s.gpus[2].nvlinks = ok(nvlinks(18, {5}));
  EXPECT_EQ(evaluate_nvlink(s, 0, {}).action(), RepairAction::kRebootSystem);

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
  auto v = evaluate_nvlink(s, 0, {e});
  EXPECT_EQ(v.health(), Health::kUnhealthy);
  EXPECT_EQ(v.action(), RepairAction::kRebootSystem);
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
  // Only where the driver begins the message.
  EXPECT_TRUE(match_lines(nvlink_kernel_log_rules(),
                          {"process '/tmp/NVRM: knvlinkUpdatePostRxDetectLinkMask_IMPL: Failed to "
                           "update Rx Detect Link mask!' started with executable stack"})
                  .empty());
}

}  // namespace
}  // namespace gpud::components
