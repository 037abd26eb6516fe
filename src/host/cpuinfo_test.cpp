#include "host/cpuinfo.h"

#include <gtest/gtest.h>

#include "host/host_fs.h"

namespace gpud::host {
namespace {

std::string fixture(std::string_view sub) {
  return std::string(GPUD_SOURCE_DIR) + "/testing/fixtures/host-os/" + std::string(sub);
}

TEST(CpuInfo, X86ModelVendorAndProcessorCount) {
  auto text = HostFs(fixture("real")).read("/proc/cpuinfo");
  ASSERT_TRUE(text.ok());
  CpuInfoSummary c = parse_cpuinfo_summary(*text);
  EXPECT_EQ(c.model_name, "AMD EPYC");
  EXPECT_EQ(c.vendor_id, "AuthenticAMD");
  EXPECT_EQ(c.logical_cores, 2);
}

// A truncated arm64 file: the implementer's name, and no model without a "CPU part".
TEST(CpuInfo, Arm64UsesImplementerAndCountsProcessors) {
  auto text = HostFs(fixture("sparse")).read("/proc/cpuinfo");
  ASSERT_TRUE(text.ok());
  CpuInfoSummary c = parse_cpuinfo_summary(*text);
  EXPECT_EQ(c.model_name, "");
  EXPECT_EQ(c.vendor_id, "ARM");
  EXPECT_EQ(c.logical_cores, 2);
}

// NVIDIA Grace (GH200, GB200): 72 Neoverse-V2 cores, no "model name" or "vendor_id" at all.
TEST(CpuInfo, GraceIsNeoverseV2ByArm) {
  auto text = HostFs(fixture("grace")).read("/proc/cpuinfo");
  ASSERT_TRUE(text.ok());
  ASSERT_EQ(text->find("model name"), std::string::npos);
  CpuInfoSummary c = parse_cpuinfo_summary(*text);
  EXPECT_EQ(c.model_name, "Neoverse-V2");
  EXPECT_EQ(c.vendor_id, "ARM");
  EXPECT_EQ(c.logical_cores, 72);
}

TEST(CpuInfo, UnknownArmCodesStayAsPrinted) {
  CpuInfoSummary c = parse_cpuinfo_summary(
      "processor\t: 0\nCPU implementer\t: 0x7f\nCPU part\t: 0x123\n\n"
      "processor\t: 1\nCPU implementer\t: 0x7f\nCPU part\t: 0x123\n");
  EXPECT_EQ(c.vendor_id, "0x7f");
  EXPECT_EQ(c.model_name, "");
  EXPECT_EQ(c.logical_cores, 2);
  // A known implementer with a core the table lacks: the vendor is named, the model is not made up.
  c = parse_cpuinfo_summary("processor\t: 0\nCPU implementer\t: 0x4e\nCPU part\t: 0xfff\n");
  EXPECT_EQ(c.vendor_id, "NVIDIA");
  EXPECT_EQ(c.model_name, "");
}

// An x86 file's names win over anything else in it; an arm64 kernel that prints "Model" (a board's
// name, e.g. a Raspberry Pi's) is used only where the core is unknown.
TEST(CpuInfo, NamesComeFromTheRightFields) {
  CpuInfoSummary c = parse_cpuinfo_summary(
      "processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R) Platinum "
      "8480+\n");
  EXPECT_EQ(c.model_name, "Intel(R) Xeon(R) Platinum 8480+");
  EXPECT_EQ(c.vendor_id, "GenuineIntel");
  c = parse_cpuinfo_summary(
      "processor\t: 0\nCPU implementer\t: 0x41\nCPU part\t: 0xd08\n\n"
      "Model\t\t: Raspberry Pi 4 Model B Rev 1.4\n");
  EXPECT_EQ(c.model_name, "Cortex-A72");
  c = parse_cpuinfo_summary(
      "processor\t: 0\nCPU implementer\t: 0x41\nCPU part\t: 0xbad\n\n"
      "Model\t\t: Raspberry Pi 4 Model B Rev 1.4\n");
  EXPECT_EQ(c.model_name, "Raspberry Pi 4 Model B Rev 1.4");
}

TEST(CpuInfo, ArmTables) {
  EXPECT_EQ(arm_implementer_name(0x41), "ARM");
  EXPECT_EQ(arm_implementer_name(0xc0), "Ampere");
  EXPECT_EQ(arm_implementer_name(0x00), "");
  EXPECT_EQ(arm_part_name(0x41, 0xd4f), "Neoverse-V2");
  EXPECT_EQ(arm_part_name(0x41, 0xd0c), "Neoverse-N1");
  // Part numbers are per implementer: ARM's 0xd4f means nothing for NVIDIA.
  EXPECT_EQ(arm_part_name(0x4e, 0xd4f), "");
}

}  // namespace
}  // namespace gpud::host
