// The kernel-log rules of the components that list their events without judging them: peermem,
// nccl and infiniband.
#include <gtest/gtest.h>

#include "components/kernel_log_test_util.h"
#include "components/nvidia/infiniband.h"
#include "components/nvidia/nccl.h"
#include "components/nvidia/peermem.h"

namespace gpud::components {
namespace {

TEST(PeermemKernelLogRule, InvalidContext) {
  auto m = match_one(peermem_kernel_log_rules(),
                     "nvidia-peermem nv_get_p2p_free_callback:127 ERROR detected invalid context, "
                     "skipping further processing");
  EXPECT_EQ(m.component, "accelerator-nvidia-peermem");
  EXPECT_EQ(m.name, "nvidia_peermem_invalid_context");
  // The module begins its message: the text inside another one is not its error.
  EXPECT_TRUE(match_lines(peermem_kernel_log_rules(),
                          {"process '/tmp/nvidia-peermem f:1 ERROR detected invalid context, "
                           "skipping further processing' started with executable stack"})
                  .empty());
}

TEST(NcclKernelLogRule, SegfaultInLibnccl) {
  auto m = match_one(nccl_kernel_log_rules(),
                     "python[1234]: segfault at 8 ip 00007f sp 00007f error 4 in "
                     "libnccl.so.2[7f+1000]");
  EXPECT_EQ(m.component, "accelerator-nvidia-nccl");
  EXPECT_EQ(m.name, "nvidia_nccl_segfault_in_libnccl");
  EXPECT_EQ(m.extra_info["library"], "libnccl.so.2[7f+1000]");
}

TEST(InfinibandKernelLogRule, PowerTemperatureAndAccessReg) {
  auto m = match_one(infiniband_kernel_log_rules(),
                     "mlx5_core 0000:5e:00.0: mlx5_pcie_event:301:(pid 0): Detected insufficient "
                     "power on the PCIe slot (27W).");
  EXPECT_EQ(m.component, "accelerator-nvidia-infiniband");
  EXPECT_EQ(m.name, "pci_power_insufficient");
  EXPECT_EQ(m.extra_info["power"], "27W");
  m = match_one(infiniband_kernel_log_rules(),
                "mlx5_core 0000:5e:00.0: Port module event[error]: module 0, Cable error, High "
                "Temperature");
  EXPECT_EQ(m.name, "port_module_high_temperature");
  m = match_one(infiniband_kernel_log_rules(),
                "mlx5_core 0000:d2:00.0: mlx5_cmd_out_err:838:(pid 1): ACCESS_REG(0x805) "
                "op_mod(0x1) failed, status bad parameter(0x3)");
  EXPECT_EQ(m.name, "access_reg_failed");
  EXPECT_EQ(m.extra_info["pci_bus_id"], "0000:d2:00.0");
}

}  // namespace
}  // namespace gpud::components
