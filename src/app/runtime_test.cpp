#include "app/runtime.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "components/nvidia/xid.h"
#include "kmsg/writer.h"
#include "testing/log_capture.h"

namespace gpud::app {
namespace {

// No NVML library, no NVIDIA device in sysfs, and a data dir that does not exist: whatever
// opens a file there fails.
Config test_config() {
  Config c;
  c.data_dir = "/nonexistent/gpud-runtime-test";
  c.host_root = "/nonexistent/gpud-runtime-test";
  c.nvml_lib = "/nonexistent/gpud-runtime-test/libnvidia-ml.so.1";
  return c;
}

TEST(BuildRuntime, ScanKeepsItsStoreInMemoryAndHasNoSelfWatch) {
  Config config = test_config();
  auto rt = build_runtime(config, RuntimeMode::kScan);
  ASSERT_TRUE(rt) << rt.error().message;
  EXPECT_TRUE((*rt)->db->path().empty());
  const Component* gpud = (*rt)->registry.find("gpud");
  ASSERT_NE(gpud, nullptr);
  EXPECT_FALSE(gpud->supported());
}

// A host root whose PCI devices cannot be listed (a container without the host's /sys): the
// start-up says that GPUs cannot be looked for, and how to fix it; --gpu-count says they are there.
TEST(BuildRuntime, UnlistablePciDevicesAreSaidAtStart) {
  Config config = test_config();
  {
    gpud::testing::LogCapture log("nvml");
    auto rt = build_runtime(config, RuntimeMode::kScan);
    ASSERT_TRUE(rt) << rt.error().message;
    EXPECT_FALSE((*rt)->nvidia_pci_present);
    EXPECT_EQ(log.count("cannot list the PCI devices"), 1U) << log.text();
    EXPECT_NE(log.text().find("pass --gpu-count"), std::string::npos);
  }
  config.gpu_count = 8;
  gpud::testing::LogCapture log("nvml");
  ASSERT_TRUE(build_runtime(config, RuntimeMode::kScan));
  EXPECT_EQ(log.count("cannot list the PCI devices"), 0U) << log.text();
}

TEST(BuildRuntime, DaemonOpensTheStateFileOfTheDataDir) {
  Config config = test_config();
  auto rt = build_runtime(config, RuntimeMode::kDaemon);
  ASSERT_FALSE(rt);
  EXPECT_NE(rt.error().message.find(config.data_dir), std::string::npos) << rt.error().message;
}

TEST(BuildRuntime, DaemonHandsTheGpudComponentItsProbesAndThePipelineItsOnEvent) {
  Config config = test_config();
  config.db_in_memory = true;
  std::vector<std::string> triggered;
  DaemonHooks hooks;
  hooks.on_kernel_log_event = [&](std::string_view c) { triggered.emplace_back(c); };
  hooks.kernel_log_counters = [] { return components::KernelLogCounters{}; };
  auto rt = build_runtime(config, RuntimeMode::kDaemon, std::move(hooks));
  ASSERT_TRUE(rt) << rt.error().message;
  const Component* gpud = (*rt)->registry.find("gpud");
  ASSERT_NE(gpud, nullptr);
  EXPECT_TRUE(gpud->supported());

  (*rt)->pipeline->set_bus_identities({{{"0000:3b:00.0", "GPU-abc"}}});
  EXPECT_EQ((*rt)->pipeline->feed_message(kmsg::xid_line(79, "0000:3b:00.0"), Clock::now()), 1);
  EXPECT_EQ(triggered, std::vector<std::string>{std::string(components::kXidComponent)});
  auto stored =
      (*rt)->events->query(std::string(components::kXidComponent), TimePoint{}, TimePoint::max());
  ASSERT_TRUE(stored);
  ASSERT_EQ(stored->size(), 1u);
  EXPECT_EQ(stored->front().extra_info.value("gpu_uuid", ""), "GPU-abc");
}

TEST(BuildRuntime, PipelineKeepsOnlyEventsOfRegisteredComponents) {
  Config config = test_config();
  config.components = {"cpu"};
  auto rt = build_runtime(config, RuntimeMode::kScan);
  ASSERT_TRUE(rt) << rt.error().message;
  EXPECT_EQ((*rt)->pipeline->feed_message(kmsg::xid_line(79, "0000:3b:00.0"), Clock::now()), 0);
}

}  // namespace
}  // namespace gpud::app
