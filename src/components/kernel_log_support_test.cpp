#include "components/kernel_log_support.h"

#include <gtest/gtest.h>

#include "components/registry.h"
#include "testing/memory_event_log.h"

namespace gpud::components {
namespace {

// A store that cannot answer is never "no events": every component that reads its kernel-log
// history (or the reboot history) from the store turns Unhealthy and says why.
TEST(KernelLogHistory, AnUnreadableStoreIsUnhealthyInEveryComponentThatReadsIt) {
  Config config;
  config.host_root = std::string(GPUD_SOURCE_DIR) + "/testing/fixtures/host/debian12";
  MetricRegistry metrics;
  testing_support::MemoryEventLog events;
  ComponentContext ctx;
  ctx.config = &config;
  ctx.metrics = &metrics;
  ctx.events = &events;
  ctx.kernel_log_scan = true;  // the NVIDIA kernel-log components take part without a GPU
  Registry registry;
  ASSERT_TRUE(register_all(registry, ctx));
  events.query_error = "database disk image is malformed";
  const std::vector<std::string> readers = {"accelerator-nvidia-error-xid",
                                            "accelerator-nvidia-error-sxid",
                                            "nfs",
                                            "pci",
                                            "disk",
                                            "memory",
                                            "cpu",
                                            "os",
                                            "accelerator-nvidia-peermem",
                                            "accelerator-nvidia-nccl"};
  for (const std::string& name : readers) {
    gpud::Component* c = registry.find(name);
    ASSERT_NE(c, nullptr) << name;
    CheckResult r = c->check();
    EXPECT_EQ(r.health(), Health::kUnhealthy) << name << ": " << r.summary();
    EXPECT_NE(r.summary().find("cannot read the kernel-log history from the event store: database "
                               "disk image is malformed"),
              std::string::npos)
        << name << ": " << r.summary();
  }
  // The same components are Healthy once the store answers (the fixture host is healthy).
  events.query_error.clear();
  for (const char* name : {"accelerator-nvidia-error-xid", "nfs", "pci"})
    EXPECT_EQ(registry.find(name)->check().health(), Health::kHealthy) << name;
}

TEST(KernelLogHistory, ScanModeReadsNoRebootHistory) {
  Config config;
  testing_support::MemoryEventLog events;
  Event reboot;
  reboot.component = "os";
  reboot.name = "reboot";
  reboot.time = Clock::now();
  ASSERT_TRUE(events.insert(reboot).value_or(false));
  ComponentContext ctx;
  ctx.config = &config;
  ctx.events = &events;
  auto h = kernel_log_history(ctx, "nfs", TimePoint{});
  ASSERT_TRUE(h);
  EXPECT_EQ(h->reboots.size(), 1u);
  ctx.scan_mode = true;
  h = kernel_log_history(ctx, "nfs", TimePoint{});
  ASSERT_TRUE(h);
  EXPECT_TRUE(h->reboots.empty());
}

}  // namespace
}  // namespace gpud::components
