#include <gtest/gtest.h>

#include <set>

#include "catalog/nvidia_products.h"
#include "catalog/nvlink_decode.h"
#include "catalog/sxid_catalog.h"
#include "catalog/xid_catalog.h"

namespace gpud::catalog {
namespace {

TEST(NvidiaProducts, MemoryErrorManagement) {
  for (const char* p : {"NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB", "NVIDIA GB200",
                        "NVIDIA B200", "NVIDIA H200", "NVIDIA-A100-SXM4-80GB"}) {
    const ProductCaps c = product_caps(p);
    EXPECT_TRUE(c.row_remapping && c.error_containment && c.dynamic_page_offlining) << p;
  }
  const ProductCaps a10 = product_caps("NVIDIA A10");
  EXPECT_TRUE(a10.row_remapping);
  EXPECT_FALSE(a10.error_containment || a10.dynamic_page_offlining);
  for (const char* p : {"NVIDIA GeForce RTX 4090", "Tesla V100-SXM2-32GB", ""})
    EXPECT_FALSE(product_caps(p).row_remapping) << p;
}

TEST(NvidiaProducts, FabricManagerAndFabricState) {
  EXPECT_TRUE(product_caps("NVIDIA H100 80GB HBM3").fabric_state);
  EXPECT_FALSE(product_caps("NVIDIA H100 PCIe").fabric_state);
  EXPECT_FALSE(product_caps("NVIDIA GH200 480GB").fabric_state);
  EXPECT_FALSE(product_caps("NVIDIA A100-SXM4-80GB").fabric_state);
  EXPECT_TRUE(product_caps("NVIDIA GB200").fabric_state);
  EXPECT_TRUE(product_caps("NVIDIA A100-SXM4-80GB").fabric_manager);
  EXPECT_TRUE(product_caps("NVIDIA H200").fabric_manager);
  EXPECT_FALSE(product_caps("NVIDIA H100 PCIe").fabric_manager);
  EXPECT_FALSE(product_caps("NVIDIA A10").fabric_manager);
  EXPECT_FALSE(product_caps("NVIDIA GB200").fabric_manager);
  EXPECT_FALSE(product_caps("NVIDIA GeForce RTX 4090").fabric_manager);
}

TEST(NvidiaProducts, PageRetirementUpToTuring) {
  EXPECT_TRUE(architecture_retires_pages("volta"));
  EXPECT_TRUE(architecture_retires_pages("turing"));
  EXPECT_FALSE(architecture_retires_pages("ampere"));
  EXPECT_FALSE(architecture_retires_pages("hopper"));
  EXPECT_FALSE(architecture_retires_pages(""));
}

TEST(XidCatalog, HasEveryAppendixEntryOnce) {
  EXPECT_EQ(xid_catalog().size(), 172u);
  std::set<int> codes;
  for (const auto& e : xid_catalog()) codes.insert(e.code);
  EXPECT_EQ(codes.size(), 172u);
  EXPECT_EQ(codes.count(133), 0u);
  EXPECT_EQ(*codes.begin(), 1);
  EXPECT_EQ(*codes.rbegin(), 173);
  int fatal = 0, info = 0;
  for (const auto& e : xid_catalog()) {
    EXPECT_NE(e.type, EventType::kUnknown);
    fatal += e.type == EventType::kFatal;
    info += e.type == EventType::kInfo;
  }
  EXPECT_EQ(fatal, 43);
  EXPECT_EQ(info, 7);
}

TEST(XidCatalog, SpotChecks) {
  auto x79 = lookup_xid(79);
  EXPECT_EQ(x79.mnemonic, "ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS");
  EXPECT_EQ(x79.description, "GPU has fallen off the bus");
  EXPECT_EQ(x79.type, EventType::kFatal);
  EXPECT_TRUE(x79.reboot_class());
  EXPECT_EQ(x79.repair_actions, (std::vector<RepairAction>{RepairAction::kRebootSystem,
                                                           RepairAction::kHardwareInspection}));
  EXPECT_EQ(lookup_xid(13).type, EventType::kWarning);
  EXPECT_EQ(lookup_xid(13).repair_actions.front(), RepairAction::kCheckUserAppAndGpu);
  EXPECT_EQ(lookup_xid(31).repair_actions.size(), 2u);
  EXPECT_EQ(lookup_xid(48).description, "Double Bit ECC Error");
  EXPECT_EQ(lookup_xid(48).type, EventType::kFatal);
  EXPECT_EQ(lookup_xid(63).type, EventType::kFatal);
  EXPECT_EQ(lookup_xid(64).mnemonic, "INFOROM_DRAM_RETIREMENT_FAILURE");
  EXPECT_EQ(lookup_xid(74).mnemonic, "NVLINK_ERROR");
  EXPECT_EQ(lookup_xid(92).repair_actions.front(), RepairAction::kIgnoreNoActionRequired);
  EXPECT_EQ(lookup_xid(94).repair_actions.back(), RepairAction::kIgnoreNoActionRequired);
  EXPECT_EQ(lookup_xid(95).type, EventType::kFatal);
  EXPECT_EQ(lookup_xid(119).mnemonic, "GSP_RPC_TIMEOUT");
  EXPECT_EQ(lookup_xid(120).mnemonic, "GSP_ERROR");
  EXPECT_EQ(lookup_xid(140).description, "Unrecovered ECC Error");
  EXPECT_EQ(lookup_xid(143).repair_actions.front(), RepairAction::kHardwareInspection);
  EXPECT_FALSE(lookup_xid(143).reboot_class());
  for (int c = 144; c <= 150; ++c) {
    EXPECT_EQ(lookup_xid(c).type, EventType::kWarning) << c;
    EXPECT_TRUE(lookup_xid(c).reboot_class()) << c;
  }
  EXPECT_EQ(lookup_xid(149).mnemonic, "NVLINK_NETIR_ERROR");
  EXPECT_EQ(lookup_xid(162).type, EventType::kInfo);
}

TEST(XidCatalog, UnknownCodeIsSynthesizedWarning) {
  EXPECT_FALSE(find_xid(133).has_value());
  auto u = lookup_xid(999);
  EXPECT_FALSE(u.known);
  EXPECT_EQ(u.type, EventType::kWarning);
  EXPECT_EQ(u.description, "unknown Xid 999");
  EXPECT_TRUE(u.repair_actions.empty());
}

TEST(SxidCatalog, HasEveryAppendixEntry) {
  EXPECT_EQ(sxid_catalog().size(), 93u);
  int fatal = 0;
  for (const auto& e : sxid_catalog()) fatal += e.type == EventType::kFatal;
  EXPECT_EQ(fatal, 64);
  EXPECT_EQ(lookup_sxid(20034).name, "LTSSM Fault Up");
  EXPECT_EQ(lookup_sxid(20034).type, EventType::kFatal);
  EXPECT_EQ(lookup_sxid(11004).repair_actions.size(), 1u);
  EXPECT_EQ(lookup_sxid(11012).type, EventType::kWarning);
  EXPECT_FALSE(lookup_sxid(1).known);
  EXPECT_EQ(lookup_sxid(1).name, "unknown SXid 1");
}

TEST(NvlinkDecode, TableAndPatterns) {
  EXPECT_EQ(nvlink_rules().size(), 94u);
  for (const auto& r : nvlink_rules()) {
    EXPECT_EQ(r.intrinfo_pattern.size(), 32u);
    EXPECT_GE(r.xid, 144);
    EXPECT_LE(r.xid, 150);
  }
  EXPECT_TRUE(intrinfo_matches("------000000-------------0000100", 0x00000004));
  EXPECT_FALSE(intrinfo_matches("------000000-------------0000100", 0x00100004));
  EXPECT_EQ(normalize_unit("tlw-rx_pipe0"), "TLW_RX_PIPE0");
}

TEST(NvlinkDecode, RuleSetsSeverityAndAction) {
  // RLW_REMAP, error status 0x40: Fatal, RESET_GPU.
  auto d = decode_nvlink(145, "RLW_REMAP", 0x00000004, 0x40, false);
  ASSERT_NE(d.rule, nullptr);
  EXPECT_EQ(d.type, EventType::kFatal);
  EXPECT_EQ(d.action, RepairAction::kRebootSystem);
  // 0x100: Non-fatal, IGNORE; a Fatal word in the log raises it.
  d = decode_nvlink(145, "RLW_REMAP", 0x00000004, 0x100, false);
  EXPECT_EQ(d.type, EventType::kWarning);
  EXPECT_EQ(d.action, RepairAction::kIgnoreNoActionRequired);
  EXPECT_EQ(decode_nvlink(145, "RLW_REMAP", 0x4, 0x100, true).type, EventType::kFatal);
  // Unit alias: TLW_RX_PIPE0 is a row "TLW_RX/TLW_RX_PIPE0".
  EXPECT_NE(decode_nvlink(146, "TLW_RX_PIPE0", 0x0000000A, 0x4, false).rule, nullptr);
  // No row: catalog defaults (Warning + REBOOT).
  d = decode_nvlink(147, "TREX", 0x0000000E, 0x12345, false);
  EXPECT_EQ(d.rule, nullptr);
  EXPECT_EQ(d.type, EventType::kWarning);
  EXPECT_EQ(d.action, RepairAction::kRebootSystem);
}

TEST(NvlinkDecode, Xid149OverridesForSubCodes4And10) {
  auto d = decode_nvlink(149, "NETIR_LINK_EVT", 0x00400011, 0, false);
  EXPECT_EQ(d.sub_code, 4);
  ASSERT_NE(d.rule, nullptr);
  EXPECT_EQ(d.type, EventType::kFatal);
  EXPECT_EQ(d.action, RepairAction::kHardwareInspection);
  EXPECT_EQ(decode_nvlink(149, "NETIR_LINK_DOWN", 0x00A00011, 0, false).sub_code, 10);
  EXPECT_EQ(decode_nvlink(149, "NETIR_LINK_DOWN", 0x00A00011, 0, false).action,
            RepairAction::kHardwareInspection);
  EXPECT_EQ(decode_nvlink(149, "NETIR_LINK_EVT", 0x00100011, 0, false).action,
            RepairAction::kRebootSystem);
}

}  // namespace
}  // namespace gpud::catalog
