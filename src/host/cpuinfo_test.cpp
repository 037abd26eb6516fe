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

TEST(CpuInfo, Arm64UsesImplementerAndCountsProcessors) {
  auto text = HostFs(fixture("sparse")).read("/proc/cpuinfo");
  ASSERT_TRUE(text.ok());
  CpuInfoSummary c = parse_cpuinfo_summary(*text);
  EXPECT_EQ(c.model_name, "");
  EXPECT_EQ(c.vendor_id, "0x41");
  EXPECT_EQ(c.logical_cores, 2);
}

}  // namespace
}  // namespace gpud::host
