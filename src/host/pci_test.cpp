#include "host/pci.h"

#include <gtest/gtest.h>

namespace gpud::host {
namespace {

std::string fixture(std::string_view sub) {
  return std::string(GPUD_SOURCE_DIR) + "/testing/fixtures/host-os/" + std::string(sub);
}

TEST(NvidiaGpu, VgaAnd3DControllersCount) {
  EXPECT_TRUE(is_nvidia_gpu("0x10de", "0x030000"));
  EXPECT_TRUE(is_nvidia_gpu("0x10DE\n", "0x030200"));
  EXPECT_FALSE(is_nvidia_gpu("0x10de", "0x040300"));  // HDMI audio function of the same card
  EXPECT_FALSE(is_nvidia_gpu("0x1a03", "0x030000"));  // ASPEED BMC VGA
}

TEST(NvidiaGpu, FindsThe3DControllerInFixture) {
  HostFs fs(fixture("pci"));
  EXPECT_EQ(find_nvidia_gpus(fs), (std::vector<std::string>{"0000:3b:00.0"}));
  EXPECT_TRUE(nvidia_gpu_present(fs));
}

// Every NVIDIA function counts as the node's own device (the GPU's audio function, NVSwitches);
// other vendors do not.
TEST(NvidiaDevices, EveryNvidiaFunctionInFixture) {
  HostFs fs(fixture("pci"));
  EXPECT_EQ(find_nvidia_devices(fs), (std::vector<std::string>{"0000:3b:00.0", "0000:3b:00.1"}));
  EXPECT_TRUE(find_nvidia_devices(HostFs(fixture("pci-none"))).empty());
}

TEST(NvidiaGpu, AbsentWithoutNvidiaDevices) {
  EXPECT_FALSE(nvidia_gpu_present(HostFs(fixture("pci-none"))));
  EXPECT_FALSE(nvidia_gpu_present(HostFs(fixture("does-not-exist"))));
}

}  // namespace
}  // namespace gpud::host
