// ACS from configuration space (the extended capability walk, short and looping lists), the bridges
// scan on the fixture trees, and bare metal versus a VM.
#include "host/pci.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "testing/temp_dir.h"

namespace gpud::host {
namespace {

const std::string kTrees = std::string(GPUD_SOURCE_DIR) + "/testing/fixtures/pci-acs/";

void put32(std::string& b, size_t at, uint32_t v) {
  for (int i = 0; i < 4; ++i) b[at + i] = static_cast<char>((v >> (8 * i)) & 0xff);
}

uint32_t header(uint16_t id, uint32_t next) { return id | (1u << 16) | (next << 20); }

TEST(PciAcs, ControlRegisterIsFoundAlongTheExtendedCapabilityList) {
  std::string b(4096, '\0');
  put32(b, 0x100, header(0x0001, 0x150));  // AER
  put32(b, 0x150, header(0x000b, 0x200));  // vendor-specific
  put32(b, 0x200, header(0x000d, 0));      // ACS
  put32(b, 0x204, 0x001d'005f);            // capability 0x005f, control 0x001d
  EXPECT_EQ(acs_control(b), 0x001d);
  put32(b, 0x204, 0x001c'005f);
  EXPECT_EQ(acs_control(b), 0x001c);
  // Without ACS: the list ends.
  put32(b, 0x150, header(0x000b, 0));
  EXPECT_EQ(acs_control(b), std::nullopt);
}

TEST(PciAcs, ShortLoopingOrEmptySpacesHaveNoAcs) {
  EXPECT_EQ(acs_control(std::string(64, '\0')), std::nullopt) << "64 bytes: not root";
  EXPECT_EQ(acs_control(""), std::nullopt);
  EXPECT_EQ(acs_control(std::string(4096, '\xff')), std::nullopt) << "a device that is gone";
  std::string loop(4096, '\0');
  put32(loop, 0x100, header(0x0001, 0x140));
  put32(loop, 0x140, header(0x0001, 0x100));  // points back
  EXPECT_EQ(acs_control(loop), std::nullopt);
  std::string cut(0x204, '\0');  // the header is there, the control register is not
  put32(cut, 0x100, header(0x000d, 0));
  EXPECT_EQ(acs_control(cut.substr(0, 0x104)), std::nullopt);
}

TEST(PciAcs, BridgesWithSourceValidationOnTheFixtureTrees) {
  auto on = scan_acs_source_validation(HostFs(kTrees + "bare-metal-acs-on"));
  EXPECT_EQ(on.source_validation, std::vector<std::string>{"0000:00:01.0"})
      << "the switch port has ACS without SrcValid, the short space has none, the GPU is no bridge";
  EXPECT_EQ(on.bridges, 3U);
  EXPECT_EQ(on.unreadable, 0U);
  EXPECT_TRUE(
      scan_acs_source_validation(HostFs(kTrees + "bare-metal-acs-off")).source_validation.empty());
  EXPECT_EQ(scan_acs_source_validation(HostFs(kTrees + "nonexistent")).bridges, 0U);
}

TEST(PciAcs, BareMetalIsTheAbsenceOfTheHypervisorFlag) {
  EXPECT_EQ(virtualization(HostFs(kTrees + "bare-metal-acs-on")), "none");
  EXPECT_EQ(virtualization(HostFs(kTrees + "vm-acs-on")), "qemu");
  EXPECT_EQ(virtualization(HostFs(kTrees + "nonexistent")), "");
}

// arm64 has no "hypervisor" flag: a Grace server is bare metal, a guest is told by its DMI or its
// device tree.
TEST(PciAcs, Arm64VirtualizationComesFromDmiAndTheDeviceTree) {
  testing_support::TempDir root("gpud-arm64-virt");
  const std::string grace = std::string(GPUD_SOURCE_DIR) + "/testing/fixtures/host-os/grace";
  std::filesystem::create_directories(root.path() + "/proc");
  std::filesystem::copy_file(grace + "/proc/cpuinfo", root.path() + "/proc/cpuinfo");
  auto write = [&](const std::string& file, const std::string& text) {
    std::filesystem::create_directories(std::filesystem::path(root.path() + file).parent_path());
    std::ofstream(root.path() + file) << text << "\n";
  };
  EXPECT_EQ(virtualization(HostFs(root.path())), "none");
  write("/sys/class/dmi/id/sys_vendor", "NVIDIA");
  write("/sys/class/dmi/id/product_name", "P3880");
  EXPECT_EQ(virtualization(HostFs(root.path())), "none");
  write("/sys/class/dmi/id/sys_vendor", "Amazon EC2");
  write("/sys/class/dmi/id/product_name", "c7g.metal");
  EXPECT_EQ(virtualization(HostFs(root.path())), "none");
  write("/sys/class/dmi/id/product_name", "c7g.16xlarge");
  EXPECT_EQ(virtualization(HostFs(root.path())), "amazon");
  write("/sys/class/dmi/id/sys_vendor", "QEMU");
  write("/sys/class/dmi/id/product_name", "KVM Virtual Machine");
  EXPECT_EQ(virtualization(HostFs(root.path())), "kvm");
  std::filesystem::remove_all(root.path() + "/sys");
  write("/proc/device-tree/hypervisor/compatible", "linux,kvm");
  EXPECT_EQ(virtualization(HostFs(root.path())), "vm");
}

}  // namespace
}  // namespace gpud::host
