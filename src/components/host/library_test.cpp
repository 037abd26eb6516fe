#include "components/host/library.h"

#include <gtest/gtest.h>

namespace gpud::components {
namespace {

std::string fixture(std::string_view sub) {
  return std::string(GPUD_SOURCE_DIR) + "/testing/fixtures/host-os/" + std::string(sub);
}

struct Harness {
  explicit Harness(std::string root) {
    config.host_root = std::move(root);
    ctx = {&config, nullptr, &metrics, false};
  }
  Config config;
  MetricRegistry metrics;
  ComponentContext ctx;
};

TEST(LibraryRule, AllFoundIsHealthy) {
  LibraryEvaluation ev =
      evaluate_libraries({{"libnvidia-ml.so.1", "/usr/lib64/libnvidia-ml.so.1"}});
  EXPECT_EQ(ev.health, Health::kHealthy);
  EXPECT_FALSE(ev.actions.has_value());
}

TEST(LibraryRule, MissingLibraryIsUnhealthyWithoutRepairAction) {
  LibraryEvaluation ev = evaluate_libraries({{"libnvidia-ml.so.1", "/x"}, {"libcuda.so.1", ""}});
  EXPECT_EQ(ev.health, Health::kUnhealthy);
  EXPECT_EQ(ev.reason, "library \"libcuda.so.1\" does not exist");
  ASSERT_TRUE(ev.actions.has_value());
  EXPECT_TRUE(ev.actions->repair_actions.empty());
  EXPECT_EQ(ev.actions->description, "install the NVIDIA driver's user-space libraries");
}

TEST(LibraryLookup, AlternativeNamesAndDirectoriesUnderHostRoot) {
  auto found = find_libraries(host::HostFs(fixture("libs")), default_library_specs(),
                              default_library_dirs());
  ASSERT_EQ(found.size(), 2u);
  EXPECT_EQ(found[0].path, "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1");
  EXPECT_EQ(found[1].path, "/usr/lib64/libcuda.so");  // the unversioned alternative
}

TEST(LibraryComponent, SupportedOnlyWithAnNvidiaGpu) {
  Harness with(fixture("pci"));
  EXPECT_TRUE(LibraryComponent(with.ctx).supported());
  Harness without(fixture("pci-none"));
  EXPECT_FALSE(LibraryComponent(without.ctx).supported());
}

TEST(LibraryComponent, MissingLibrariesOnGpuHostAreUnhealthy) {
  Harness h(fixture("pci"));  // has a GPU, no libraries
  CheckResult r = LibraryComponent(h.ctx).check();
  EXPECT_EQ(r.health(), Health::kUnhealthy);
  EXPECT_EQ(
      r.states[0].reason,
      "library \"libnvidia-ml.so.1\" does not exist; library \"libcuda.so.1\" does not exist");
}

TEST(LibraryComponent, InstalledLibrariesAreHealthy) {
  Harness h(fixture("libs"));
  CheckResult r = LibraryComponent(h.ctx).check();
  EXPECT_EQ(r.health(), Health::kHealthy);
  auto data = r.states[0].data;
  EXPECT_EQ(data["libraries"]["libcuda.so.1"], "/usr/lib64/libcuda.so");
}

TEST(LibraryComponent, FindsTheGpuOperatorsDriverRootOnItsOwn) {
  Harness h(fixture("gpu-operator"));  // libraries only under run/nvidia/driver
  CheckResult r = LibraryComponent(h.ctx).check();
  EXPECT_EQ(r.health(), Health::kHealthy) << r.summary();
  auto data = r.states[0].data;
  EXPECT_EQ(
      data["libraries"]["libnvidia-ml.so.1"],
      fixture("gpu-operator") + "/run/nvidia/driver/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1");
}

TEST(LibraryComponent, HonoursTheConfiguredDriverRoot) {
  Harness h(fixture("pci"));  // a GPU, no libraries of its own
  h.config.nvidia_driver_root = fixture("driver-root");
  CheckResult r = LibraryComponent(h.ctx).check();
  EXPECT_EQ(r.health(), Health::kHealthy) << r.summary();
  auto data = r.states[0].data;
  EXPECT_EQ(data["libraries"]["libcuda.so.1"], fixture("driver-root") + "/usr/lib64/libcuda.so.1");
}

TEST(LibraryComponent, DriverRootMissingALibraryIsStillUnhealthy) {
  Harness h(fixture("pci"));
  h.config.nvidia_driver_root = fixture("libs");  // has libnvidia-ml.so.1 and libcuda.so
  EXPECT_EQ(LibraryComponent(h.ctx).check().health(), Health::kHealthy);
  h.config.nvidia_driver_root = fixture("pci");  // no libraries at all
  CheckResult r = LibraryComponent(h.ctx).check();
  EXPECT_EQ(r.health(), Health::kUnhealthy);
  EXPECT_EQ(
      r.states[0].reason,
      "library \"libnvidia-ml.so.1\" does not exist; library \"libcuda.so.1\" does not exist");
}

}  // namespace
}  // namespace gpud::components
