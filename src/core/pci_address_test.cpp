#include "core/pci_address.h"

#include <gtest/gtest.h>

namespace gpud {
namespace {

TEST(PciAddress, EveryReadersFormBecomesOne) {
  EXPECT_EQ(normalize_pci_bus_id("00000000:3B:00.0"), "0000:3b:00.0");  // NVML
  EXPECT_EQ(normalize_pci_bus_id("0000:3b:00.0"), "0000:3b:00.0");      // sysfs
  EXPECT_EQ(normalize_pci_bus_id("PCI:0000:3B:00"), "0000:3b:00.0");    // kernel log
  EXPECT_EQ(normalize_pci_bus_id("3b:00"), "0000:3b:00.0");
  EXPECT_EQ(normalize_pci_bus_id("00000000:3b:00.1"), "0000:3b:00.1");
  EXPECT_EQ(normalize_pci_bus_id(std::string_view("00000000:3B:00.0\0\0\0", 19)), "0000:3b:00.0");
}

// The disagreement this resolved: NVML's reader kept an 8-digit domain ("00010000:3b:00.0") and
// the kernel log's cut it to its last 4 digits ("0000:3b:00.0", another GPU's id). Both now give
// the domain as sysfs and the kernel print it.
TEST(PciAddress, DomainsAboveFourDigitsKeepTheirDigitsOnce) {
  EXPECT_EQ(normalize_pci_bus_id("00010000:3B:00.0"), "10000:3b:00.0");
  EXPECT_EQ(normalize_pci_bus_id("PCI:10000:3b:00"), "10000:3b:00.0");
  EXPECT_EQ(normalize_pci_bus_id("10000:3b:00.0"), "10000:3b:00.0");
  EXPECT_EQ(normalize_pci_bus_id("0018:01:00"), "0018:01:00.0");
}

TEST(PciAddress, TextThatIsNoAddressIsOnlyLowerCased) {
  EXPECT_EQ(normalize_pci_bus_id("garbage"), "garbage");
  EXPECT_EQ(normalize_pci_bus_id("GPU-ABC"), "gpu-abc");
  EXPECT_EQ(normalize_pci_bus_id("0x12:3b:00.0"), "0x12:3b:00.0");
  EXPECT_EQ(normalize_pci_bus_id("000000000:3b:00.0"), "000000000:3b:00.0");  // 9-digit domain
  EXPECT_EQ(normalize_pci_bus_id("0000:3b:00.12"), "0000:3b:00.12");
  EXPECT_EQ(normalize_pci_bus_id("0000:3b:00:00.0"), "0000:3b:00:00.0");
  EXPECT_EQ(normalize_pci_bus_id(""), "");
}

// DCGM and dcgm-exporter write NVML's own form, which joins with their data.
TEST(PciAddress, NvmlFormHasAnEightDigitUpperCaseDomain) {
  EXPECT_EQ(nvml_pci_bus_id("0000:5d:00.0"), "00000000:5D:00.0");
  EXPECT_EQ(nvml_pci_bus_id("PCI:0000:5d:00"), "00000000:5D:00.0");
  EXPECT_EQ(nvml_pci_bus_id("10000:3b:1f.1"), "00010000:3B:1F.1");
  EXPECT_EQ(nvml_pci_bus_id("00000000:3B:00.0"), "00000000:3B:00.0");
  EXPECT_EQ(nvml_pci_bus_id("Unknown"), "unknown");
}

}  // namespace
}  // namespace gpud
