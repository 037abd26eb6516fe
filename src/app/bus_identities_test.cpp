#include "app/bus_identities.h"

#include <gtest/gtest.h>

namespace gpud::app {
namespace {

nvml::GpuSnapshot gpu(std::string bus, std::string uuid) {
  nvml::GpuSnapshot g;
  g.pci_bus_id.value = std::move(bus);
  g.pci_bus_id.status = nvml::FieldStatus::kOk;
  if (!uuid.empty()) {
    g.uuid.value = std::move(uuid);
    g.uuid.status = nvml::FieldStatus::kOk;
  }
  return g;
}

// "known, named `uuid`" ("" for known but unnamed).
::testing::AssertionResult known_as(const kmsg::BusIdentity& id, std::string_view uuid) {
  if (id.known && id.uuid == uuid) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "known " << id.known << ", uuid \"" << id.uuid << "\"";
}

// NVML names the GPUs it lists; sysfs adds the devices NVML does not list (a GPU fallen off the
// bus), known but unnamed; both bus id forms meet on the normalized one.
TEST(BusIdentityTable, NvmlNamesItsGpusAndSysfsAddsTheRest) {
  nvml::NvmlSnapshot snap;
  snap.gpus = {gpu("00000000:3B:00.0", "GPU-abc"), gpu("00000000:5E:00.0", "")};
  const kmsg::BusIdentityTable t = bus_identity_table(&snap, {"0000:3b:00.0", "0000:86:00.0"});
  EXPECT_TRUE(known_as(t.identify("0000:3b:00.0"), "GPU-abc"));
  EXPECT_TRUE(known_as(t.identify("PCI:0000:3b:00"), "GPU-abc"));
  EXPECT_TRUE(known_as(t.identify("0000:5e:00.0"), ""));
  EXPECT_TRUE(known_as(t.identify("0000:86:00.0"), ""));
  EXPECT_FALSE(t.identify("0000:99:00.0").known);
  EXPECT_EQ(t.uuid_by_bus.size(), 3u);
}

TEST(BusIdentityTable, WithoutNvmlOnlySysfsDevicesAreKnown) {
  const kmsg::BusIdentityTable t = bus_identity_table(nullptr, {"0000:3b:00.0"});
  EXPECT_TRUE(known_as(t.identify("0000:3B:00.0"), ""));
  EXPECT_EQ(bus_identity_table(nullptr, {}), kmsg::BusIdentityTable{});
}

}  // namespace
}  // namespace gpud::app
