#include "kmsg/matchers.h"

#include <gtest/gtest.h>

#include <cstdint>

namespace gpud::kmsg {
namespace {

Match one(std::string_view line) {
  auto m = match_message(line);
  EXPECT_EQ(m.size(), 1u) << line;
  return m.empty() ? Match{} : m.front();
}

TEST(XidMatcher, StandardFormsWithPidAndName) {
  auto m =
      one("NVRM: Xid (PCI:0000:3B:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the "
          "bus.");
  EXPECT_EQ(m.component, "accelerator-nvidia-error-xid");
  EXPECT_EQ(m.name, "error_xid");
  EXPECT_EQ(m.type, EventType::kFatal);
  EXPECT_EQ(m.extra_info["pci_bus_id"], "0000:3b:00.0");
  EXPECT_EQ(m.extra_info["xid"], 79);
  EXPECT_EQ(m.extra_info["mnemonic"], "ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS");
  EXPECT_FALSE(m.extra_info.contains("pid"));
  EXPECT_NE(m.message.find("XID 79 ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS"), std::string::npos);

  m = one("NVRM: Xid (PCI:0000:9b:00): 119, pid=2024380, name=nvidia-smi, Timeout after 6s");
  EXPECT_EQ(m.extra_info["pid"], 2024380);
  EXPECT_EQ(m.extra_info["process_name"], "nvidia-smi");
  EXPECT_EQ(m.extra_info["xid"], 119);
  m = one("NVRM: Xid (0000:03:00): 14, Channel 00000001");
  EXPECT_EQ(m.extra_info["pci_bus_id"], "0000:03:00.0");
  m = one("NVRM: Xid (PCI:0000:01:00 GPU-I:05): 94, pid=7194, Contained: CE User Channel (0x9).");
  EXPECT_EQ(m.extra_info["gpu_instance"], 5);
  EXPECT_EQ(m.extra_info["xid"], 94);
  m = one("NVRM: Xid (PCI:0000:01:00): 9999, something new");
  EXPECT_EQ(m.type, EventType::kWarning);
  EXPECT_EQ(m.extra_info["description"], "unknown Xid 9999");
}

TEST(XidMatcher, FallenOffTheBusForms) {
  auto m = one("NVRM: GPU 0000:18:00.0: GPU has fallen off the bus.");
  EXPECT_EQ(m.extra_info["xid"], 79);
  EXPECT_EQ(m.extra_info["pci_bus_id"], "0000:18:00.0");
  m = one("NVRM: GPU 18:00.0: GPU has fallen off the bus.");
  EXPECT_EQ(m.extra_info["pci_bus_id"], "0000:18:00.0");
  m = one(
      "NVRM: The NVIDIA GPU 0000:b3:00.0\nNVRM: (PCI ID: 10de:2330) installed in this system has\n"
      "NVRM: fallen off the bus and is not responding to commands.");
  EXPECT_EQ(m.extra_info["pci_bus_id"], "0000:b3:00.0");

  KernelLogMatcher s;
  EXPECT_TRUE(s.feed("NVRM: The NVIDIA GPU 0000:b3:00.0").empty());
  EXPECT_TRUE(s.feed("NVRM: (PCI ID: 10de:2330) installed in this system has").empty());
  auto v = s.feed("NVRM: fallen off the bus and is not responding to commands.");
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0].extra_info["xid"], 79);
  EXPECT_EQ(v[0].extra_info["pci_bus_id"], "0000:b3:00.0");
  EXPECT_TRUE(s.feed("NVRM: fallen off the bus and is not responding to commands.").empty());
}

TEST(XidMatcher, NvlinkExtendedForm) {
  auto m =
      one("NVRM: Xid (PCI:0018:01:00): 145, RLW_REMAP Nonfatal XC0 i0 Link 12 (0x00000004 "
          "0x00000040 0x0 0x0)");
  EXPECT_EQ(m.extra_info["xid"], 145);
  EXPECT_EQ(m.extra_info["unit"], "RLW_REMAP");
  EXPECT_EQ(m.extra_info["link"], 12);
  EXPECT_EQ(m.extra_info["error_status"], 0x40);
  EXPECT_EQ(m.type, EventType::kFatal);
  EXPECT_EQ(m.extra_info["pci_bus_id"], "0018:01:00.0");
  m =
      one("NVRM: Xid (PCI:0018:01:00): 149, pid=12, name=x, NETIR_LINK_EVT Fatal XC0 i0 Link 08 "
          "(0x00400011 0x00000000 0x0)");
  EXPECT_EQ(m.extra_info["sub_code"], 4);
  EXPECT_EQ(m.extra_info["repair_actions"][0], "HARDWARE_INSPECTION");
  EXPECT_NE(m.message.find("XID 149.4"), std::string::npos);
}

// Numbers wider than their field once threw out of the matcher (std::stoll, std::stoul) and ended
// the process: now the Xid is kept and the field is marked invalid.
TEST(XidMatcher, OversizedNumbersAreMarkedInvalidNotThrown) {
  auto m = one(
      "NVRM: Xid (PCI:0000:3b:00): 79, pid=99999999999999999999, name=x, GPU has fallen off the "
      "bus.");
  EXPECT_EQ(m.extra_info["xid"], 79);
  EXPECT_EQ(m.extra_info["pci_bus_id"], "0000:3b:00.0");
  EXPECT_FALSE(m.extra_info.contains("pid"));
  EXPECT_EQ(m.extra_info["pid_invalid"], true);
  EXPECT_EQ(m.extra_info["process_name"], "x");
  m =
      one("NVRM: Xid (PCI:0018:01:00): 145, RLW_REMAP Nonfatal XC0 i0 Link 12 (0x10000000000000004 "
          "0x00000040 0x0 0x0)");
  EXPECT_EQ(m.extra_info["xid"], 145);
  EXPECT_EQ(m.extra_info["nvlink_fields_invalid"], true);
  EXPECT_FALSE(m.extra_info.contains("error_status"));
  m =
      one("NVRM: Xid (PCI:0018:01:00): 145, RLW_REMAP Nonfatal XC0 i0 Link 12 (0x00000004 "
          "0xfffffffff 0x0 0x0)");
  EXPECT_EQ(m.extra_info["nvlink_fields_invalid"], true);
  // The largest values that fit are still read.
  m = one("NVRM: Xid (PCI:0000:3b:00): 13, pid=9223372036854775807, name=y, Graphics Exception");
  EXPECT_EQ(m.extra_info["pid"], INT64_MAX);
  m =
      one("NVRM: Xid (PCI:0018:01:00): 145, RLW_REMAP Nonfatal XC0 i0 Link 12 (0xffffffff "
          "0xFFFFFFFF 0x0 0x0)");
  EXPECT_EQ(m.extra_info["intrinfo"], 0xffffffffu);
  EXPECT_EQ(m.extra_info["error_status"], 0xffffffffu);
}

TEST(XidMatcher, NearMisses) {
  EXPECT_TRUE(match_message("NVRM: loading NVIDIA UNIX x86_64 Kernel Module 550.54.15").empty());
  EXPECT_TRUE(match_message("NVRM: Xid is a word here").empty());
  EXPECT_TRUE(match_message("NVRM: Xid (PCI:0000:3b:00): foo").empty());
  EXPECT_TRUE(match_message("GPU has fallen off").empty());
}

TEST(SxidMatcher, Lines) {
  auto m =
      one("nvidia-nvswitch3: SXid (PCI:0000:05:00.0): 12028, Non-fatal, Link 32 egress non-posted "
          "PRIV error (First)");
  EXPECT_EQ(m.component, "accelerator-nvidia-error-sxid");
  EXPECT_EQ(m.name, "error_sxid");
  EXPECT_EQ(m.extra_info["sxid"], 12028);
  EXPECT_EQ(m.extra_info["nvswitch"], 3);
  EXPECT_EQ(m.type, EventType::kFatal);
  m = one("nvidia-nvswitch0: SXid (PCI:0000:00:00.0): 20034, Fatal, Link 30 LTSSM Fault Up");
  EXPECT_EQ(m.message, "SXID 20034(LTSSM Fault Up) detected on PCI:0000:00:00.0");
  EXPECT_EQ(one("nvidia-nvswitch0: SXid (PCI:0000:00:00.0): 20034, Severity 1 Engine instance 60")
                .extra_info["sxid"],
            20034);
  EXPECT_TRUE(match_message("nvidia-nvswitch0: SXid support enabled").empty());
}

TEST(OomMatcher, ModernAndLegacySequences) {
  KernelLogMatcher s;
  EXPECT_TRUE(s.feed("python3 invoked oom-killer: gfp_mask=0x140cca, order=0").empty());
  EXPECT_TRUE(s.feed("Mem-Info:").empty());
  auto v = s.feed(
      "oom-kill:constraint=CONSTRAINT_NONE,nodemask=(null),cpuset=/"
      ",mems_allowed=0,global_oom,task_memcg=/user.slice,task=python3,pid=98765,uid=1000");
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0].component, "memory");
  EXPECT_EQ(v[0].name, "OOM");
  EXPECT_EQ(v[0].message, "System OOM encountered, victim process: python3, pid: 98765");
  EXPECT_TRUE(s.feed("Out of memory: Killed process 98765 (python3) total-vm:1kB").empty());

  s.feed("java invoked oom-killer: gfp_mask=0x14000c0");
  s.feed("Task in /kubepods/pod1 killed as a result of limit of /kubepods/pod1");
  v = s.feed("Memory cgroup out of memory: Killed process 4242 (java) total-vm:1kB");
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0].message, "OOM encountered, victim process: java, pid: 4242");
  EXPECT_TRUE(KernelLogMatcher().feed("Killed process 1 (x)").empty());  // no start line
}

TEST(CpuMatchers, HungTaskAndSoftLockup) {
  auto m = one("INFO: task kworker/u8:2:1234 blocked for more than 120 seconds.");
  EXPECT_EQ(m.component, "cpu");
  EXPECT_EQ(m.name, "cpu_blocked_too_long");
  EXPECT_EQ(m.extra_info["task"], "kworker/u8:2:1234");
  m = one("watchdog: BUG: soft lockup - CPU#12 stuck for 23s! [python3:4567]");
  EXPECT_EQ(m.name, "cpu_soft_lockup");
  EXPECT_TRUE(match_message("task foo blocked for a while").empty());
}

TEST(OsMatchers, PanicNeedsCpuLineWithinTenLines) {
  KernelLogMatcher s;
  EXPECT_TRUE(s.feed("Kernel panic - not syncing: sysrq triggered crash").empty());
  auto v = s.feed("CPU: 7 PID: 31337 Comm: bash Tainted: G OE 5.15.0");
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0].name, "kernel_panic");
  EXPECT_EQ(v[0].message, "Kernel panic detected - CPU: 7, PID: 31337, Process: bash");
  s.feed("Kernel panic - not syncing: Fatal exception");
  for (int i = 0; i < 10; ++i) s.feed("Call Trace:");
  EXPECT_TRUE(s.feed("CPU: 1 PID: 2 Comm: x").empty());
  EXPECT_EQ(one("VFS: file-max limit 1000000 reached").name, "vfs_file_max_limit_reached");
}

TEST(DiskMatchers, AllFamilies) {
  struct Case {
    const char* line;
    const char* name;
  } cases[] = {
      {"md/raid1:md0: Disk failure on sdb1, disabling device.", nullptr},
      {"md/raid10:md127: Disk failure on nvme1n1 detected, failing array", "raid_array_failure"},
      {"EXT4-fs (nvme0n1p2): Remounting filesystem read-only", "filesystem_read_only"},
      {"block nvme0n1: no available path - failing I/O", "nvme_path_failure"},
      {"nvme nvme0: I/O 123 QID 4 timeout, reset controller", "nvme_controller_timeout"},
      {"nvme nvme1: Disabling device after reset failure: -19", "nvme_device_disabled"},
      {"attempt to access beyond end of device", "beyond_end_of_device"},
      {"Buffer I/O error on dev nvme0n1p1, logical block 0, async page read", "buffer_io_error"},
      {"EXT4-fs error (device sda1): I/O error while writing superblock", "superblock_write_error"},
  };
  for (const auto& c : cases) {
    auto v = match_message(c.line);
    if (c.name == nullptr) {
      EXPECT_TRUE(v.empty()) << c.line;
      continue;
    }
    ASSERT_EQ(v.size(), 1u) << c.line;
    EXPECT_EQ(v[0].component, "disk");
    EXPECT_EQ(v[0].name, c.name);
  }
  EXPECT_EQ(one("EXT4-fs (nvme0n1p2): Remounting filesystem read-only").extra_info["device"],
            "nvme0n1p2");
}

TEST(NfsMatchers, All) {
  EXPECT_EQ(one("nfs: server 10.0.0.5 not responding, still trying").name,
            "nfs_server_not_responding");
  EXPECT_EQ(one("nfs: server 10.0.0.5 OK").name, "nfs_server_ok");
  EXPECT_EQ(one("NFS: nfs4_reclaim_open_state: Lock reclaim failed!").name,
            "nfs_lock_reclaim_failed");
  EXPECT_EQ(one(" nfs_wb_all+0x5c/0x120 [nfs]").name, "nfs_writeback_hang");
  EXPECT_TRUE(match_message("xnfs_wb_all+0x5c").empty());
}

TEST(NvidiaMatchers, PeermemNcclInfinibandNvlink) {
  auto m =
      one("nvidia-peermem nv_get_p2p_free_callback:127 ERROR detected invalid context, skipping "
          "further processing");
  EXPECT_EQ(m.component, "accelerator-nvidia-peermem");
  m = one("python[1234]: segfault at 8 ip 00007f sp 00007f error 4 in libnccl.so.2[7f+1000]");
  EXPECT_EQ(m.name, "nvidia_nccl_segfault_in_libnccl");
  m =
      one("mlx5_core 0000:5e:00.0: mlx5_pcie_event:301:(pid 0): Detected insufficient power on the "
          "PCIe slot (27W).");
  EXPECT_EQ(m.name, "pci_power_insufficient");
  m = one(
      "mlx5_core 0000:5e:00.0: Port module event[error]: module 0, Cable error, High Temperature");
  EXPECT_EQ(m.name, "port_module_high_temperature");
  m =
      one("mlx5_core 0000:d2:00.0: mlx5_cmd_out_err:838:(pid 1): ACCESS_REG(0x805) op_mod(0x1) "
          "failed, status bad parameter(0x3)");
  EXPECT_EQ(m.name, "access_reg_failed");
  EXPECT_EQ(m.extra_info["pci_bus_id"], "0000:d2:00.0");
  m = one("NVRM: knvlinkUpdatePostRxDetectLinkMask_IMPL: Failed to update Rx Detect Link mask!");
  EXPECT_EQ(m.component, "accelerator-nvidia-nvlink");
  EXPECT_EQ(
      one("NVRM: knvlinkDiscoverPostRxDetLinks_GH100: Getting peer0's postRxDetLinkMask failed!")
          .name,
      "nvlink_post_rx_detect_failure");
}

TEST(AerMatcher, SeverityAndDevice) {
  auto m = one("pcieport 0000:00:03.1: AER: Corrected error received: 0000:3b:00.0");
  EXPECT_EQ(m.component, "pci");
  EXPECT_EQ(m.type, EventType::kWarning);
  EXPECT_EQ(m.extra_info["pci_bus_id"], "0000:3b:00.0");
  m = one("pcieport 0000:80:01.1: AER: Uncorrected (Non-Fatal) error received: 0000:86:00.0");
  EXPECT_EQ(m.type, EventType::kCritical);
  m = one(
      "pcieport 0000:80:01.1: AER: Uncorrectable (Fatal) error message received from 0000:86:00.0");
  EXPECT_EQ(m.type, EventType::kFatal);
  EXPECT_TRUE(match_message("AER: enabled with IRQ 24").empty());
}

// The Xid of a GPU in a PCI domain above 0xffff names the bus id NVML and sysfs give that GPU.
TEST(XidMatcher, WideDomainsKeepTheirDigits) {
  auto m = one("NVRM: Xid (PCI:10000:3b:00): 79, pid=1, name=x, GPU has fallen off the bus.");
  EXPECT_EQ(m.extra_info["pci_bus_id"], "10000:3b:00.0");
}

TEST(Prefilter, RejectsOrdinaryLines) {
  EXPECT_FALSE(may_match("usb 1-1: new high-speed USB device number 2 using xhci_hcd"));
  EXPECT_FALSE(may_match(""));
  EXPECT_TRUE(may_match("xx NVRM: Xid (PCI:0000:3b:00): 79"));
  EXPECT_TRUE(may_match("pcieport 0000:00:01.0: AER: Corrected error received: 0000:01:00.0"));
  EXPECT_TRUE(may_match("AER: Multiple Uncorrected (Non-Fatal) error received: 0000:01:00.0"));
  EXPECT_FALSE(may_match("pcieport 0000:00:01.0: AER: enabled with IRQ 120"));
  // Lines sharing words with a keyword ("filesystem", "Kernel") are not candidates.
  EXPECT_FALSE(may_match("EXT4-fs (nvme0n1p2): mounted filesystem with ordered data mode."));
  EXPECT_FALSE(may_match("nvidia-modeset: Loading NVIDIA Kernel Mode Setting Driver 535.161.08"));
  // Every keyword is found at every alignment the sampled windows can meet it.
  for (std::string_view k :
       {"NVRM: Xid (", "SXid (", "in libnccl", "filesystem read-only", "The NVIDIA GPU",
        "soft lockup", "Kernel panic", "Kernel Panic", "available path", "reset controller",
        "after reset failure", "writing superblock", "Lock reclaim failed", "invalid context",
        "High Temperature", "Rx Detect Link mask", "fallen off the bus", "AER: Mult"})
    for (size_t pad = 0; pad < 12; ++pad)
      EXPECT_TRUE(may_match(std::string(pad, 'x') + std::string(k) + " tail")) << k << " " << pad;
}

}  // namespace
}  // namespace gpud::kmsg
