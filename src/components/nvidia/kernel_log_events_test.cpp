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

// The kernel's x86 report of a fatal user page fault (arch/x86/mm/fault.c show_signal_msg and
// mm/memory.c print_vma_addr): "%s[%d]: segfault at %lx ip %px sp %px error %lx" + " in
// %s[%lx+%lx]", as Linux 4.15 to 6.0 print it; 6.1 and later add " likely on CPU %d (core %d,
// socket %d)"; before 4.15 ip and sp were %p, "(null)" for a null pointer.
TEST(NcclKernelLogRule, SegfaultInLibnccl) {
  auto m = match_one(nccl_kernel_log_rules(),
                     "python[1234]: segfault at 8 ip 00007f sp 00007f error 4 in "
                     "libnccl.so.2[7f+1000]");
  EXPECT_EQ(m.component, "accelerator-nvidia-nccl");
  EXPECT_EQ(m.name, "nvidia_nccl_segfault_in_libnccl");
  EXPECT_EQ(m.extra_info["library"], "libnccl.so.2[7f+1000]");
  m = match_one(nccl_kernel_log_rules(),
                "pt_main_thread[881234]: segfault at 0 ip 00007f3a1c2b4d10 sp 00007ffc9e1a2b40 "
                "error 4 in libnccl.so.2.18.3[7f3a1c000000+9a4000] likely on CPU 17 (core 5, "
                "socket 0)");
  EXPECT_EQ(m.extra_info["library"], "libnccl.so.2.18.3[7f3a1c000000+9a4000]");
  // A comm with spaces and brackets, a caller id (CONFIG_PRINTK_CALLER), a pre-4.15 null ip.
  m = match_one(nccl_kernel_log_rules(),
                "[ T4242] Loop [2] x[4242]: segfault at 0 ip (null) sp 00007ffc9e1a2b40 error 14 "
                "in libnccl.so[7f0000000000+1000]");
  EXPECT_EQ(m.extra_info["library"], "libnccl.so[7f0000000000+1000]");
}

// The text elsewhere in a message is not the kernel's report: the once-per-boot "process '%pD4'
// started with executable stack" (fs/exec.c, Linux 5.8 and later) prints a path any user chooses,
// and a report of a fault in another file only names libnccl in its comm.
TEST(NcclKernelLogRule, TheReportQuotedInAnotherMessageIsNoSegfault) {
  EXPECT_TRUE(match_lines(nccl_kernel_log_rules(),
                          {"process '/tmp/x[1]: segfault at 0 ip 0 sp 0 error 4 in "
                           "libnccl.so.2[7f+1000]' started with executable stack",
                           "process '/tmp/python[1234]: segfault at 8 ip 00007f sp 00007f error 4 "
                           "in libnccl.so.2[7f+1000]",
                           "audit: python[1234]: segfault at 8 ip 00007f sp 00007f error 4 in "
                           "libc.so.6[7f+1000] in libnccl.so.2[7f+1000] x",
                           "in libnccl[1]: segfault at 8 ip 00007f sp 00007f error 4 in "
                           "libc.so.6[7f+1000]"})
                  .empty());
}

// mlx5_core's messages (drivers/net/ethernet/mellanox/mlx5/core): dev_printk's "mlx5_core <device>:
// ", then mlx5_core_warn/mlx5_core_err's "%s:%d:(pid %d): " (mlx5_core.h, Linux 4.x to 6.x).
// mlx5_pcie_event (events.c): "Detected insufficient power on the PCIe slot (%uW)."; the port
// module event: "Port module event[error]: module %u, %s, %s"; mlx5_cmd_out_err (cmd.c, Linux
// 5.19 and later): "%s(0x%x) op_mod(0x%x) failed, status %s(0x%x), syndrome (0x%x), err(%d)".
TEST(InfinibandKernelLogRule, PowerTemperatureAndAccessReg) {
  auto m = match_one(infiniband_kernel_log_rules(),
                     "mlx5_core 0000:5e:00.0: mlx5_pcie_event:301:(pid 0): Detected insufficient "
                     "power on the PCIe slot (27W).");
  EXPECT_EQ(m.component, "accelerator-nvidia-infiniband");
  EXPECT_EQ(m.name, "pci_power_insufficient");
  EXPECT_EQ(m.extra_info["power"], "27W");
  m = match_one(infiniband_kernel_log_rules(),
                "mlx5_core 0000:5e:00.0: port_module:276:(pid 0): Port module event[error]: module "
                "0, Cable error, High Temperature");
  EXPECT_EQ(m.name, "port_module_high_temperature");
  m = match_one(infiniband_kernel_log_rules(),
                "mlx5_core 0000:5e:00.0: Port module event[error]: module 0, Cable error, High "
                "Temperature");
  EXPECT_EQ(m.name, "port_module_high_temperature");
  m = match_one(infiniband_kernel_log_rules(),
                "mlx5_core 0000:d2:00.0: mlx5_cmd_out_err:838:(pid 1): ACCESS_REG(0x805) "
                "op_mod(0x1) failed, status bad parameter(0x3)");
  EXPECT_EQ(m.name, "access_reg_failed");
  EXPECT_EQ(m.extra_info["pci_bus_id"], "0000:d2:00.0");
  // A sub-function's device is no PCI address; a caller id comes first on CONFIG_PRINTK_CALLER.
  m = match_one(infiniband_kernel_log_rules(),
                "[ T1200] mlx5_core.sf mlx5_core.sf.2: mlx5_cmd_out_err:838:(pid 1200): "
                "ACCESS_REG(0x805) op_mod(0x1) failed, status bad parameter(0x3), syndrome "
                "(0x6a3a2), err(-22)");
  EXPECT_EQ(m.name, "access_reg_failed");
  EXPECT_FALSE(m.extra_info.contains("pci_bus_id"));
}

TEST(InfinibandKernelLogRule, TheDriversTextQuotedInAnotherMessageIsNoEvent) {
  EXPECT_TRUE(
      match_lines(infiniband_kernel_log_rules(),
                  {"process '/tmp/mlx5_core 0000:5e:00.0: mlx5_pcie_event:301:(pid 0): Detected "
                   "insufficient power on the PCIe slot (27W).' started with executable stack",
                   "process '/tmp/Detected insufficient power on the PCIe slot (27W)' started "
                   "with executable stack",
                   "process '/tmp/mlx5_core 0000:5e:00.0: Port module event[error]: module 0, "
                   "Cable error, High Temperature' started with executable stack",
                   "process '/tmp/mlx5_core 0000:d2:00.0: mlx5_cmd_out_err:838:(pid 1): "
                   "ACCESS_REG(0x805) op_mod(0x1) failed' started with executable stack",
                   "nvme nvme0: mlx5_cmd_out_err ACCESS_REG(0x805) op_mod(0x1) failed",
                   "mlx5_core 0000:5e:00.0: mlx5e_open: user text Detected insufficient power on "
                   "the PCIe slot (27W)."})
          .empty());
}

}  // namespace
}  // namespace gpud::components
