#include "components/kernel_log_support.h"

#include <gtest/gtest.h>

#include "components/host/disk.h"
#include "components/host/pci.h"
#include "components/registry.h"
#include "core/time_util.h"
#include "kmsg/event_pipeline.h"
#include "nvml/source.h"
#include "store/database.h"
#include "store/event_store.h"
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

// `gpud scan --kernel-log` on a machine without NVML (docs/CLI.md): every component with
// kernel-log rules takes part, GPU or not, so no line a rule matches is left out of the report.
TEST(KernelLogHistory, EveryKernelLogComponentTakesPartInAScanWithoutNvml) {
  Config config;
  config.host_root = std::string(GPUD_SOURCE_DIR) + "/testing/fixtures/nonexistent-root";
  MetricRegistry metrics;
  testing_support::MemoryEventLog events;
  nvml::NvidiaSource nvml(std::string(GPUD_SOURCE_DIR) + "/testing/fixtures/no-libnvidia-ml.so.1",
                          std::chrono::seconds(2));
  nvml.open();
  ASSERT_EQ(nvml.status(), nvml::NvmlStatus::kNotFound);
  ComponentContext ctx;
  ctx.config = &config;
  ctx.metrics = &metrics;
  ctx.events = &events;
  ctx.scan_mode = true;
  ctx.nvidia = &nvml;
  ctx.kernel_log_scan = true;
  Registry registry;
  ASSERT_TRUE(register_all(registry, ctx));
  for (const kmsg::ComponentRules& rules : all_kernel_log_rules()) {
    gpud::Component* c = registry.find(rules.component);
    ASSERT_NE(c, nullptr) << rules.component;
    EXPECT_TRUE(c->supported()) << rules.component;
  }
  // The NVLink driver's failure is judged from the log alone: Unhealthy, reboot.
  kmsg::EventPipeline d(kernel_log_rules(registry), events, metrics, {});
  ASSERT_EQ(d.feed_message("NVRM: knvlinkUpdatePostRxDetectLinkMask_IMPL: Failed to update Rx "
                           "Detect Link mask!",
                           std::nullopt),
            1);
  CheckResult r = registry.find("accelerator-nvidia-nvlink")->check();
  EXPECT_EQ(r.health(), Health::kUnhealthy) << r.summary();
  ASSERT_TRUE(r.states.front().suggested_actions);
  EXPECT_EQ(r.states.front().suggested_actions->repair_actions,
            std::vector{RepairAction::kRebootSystem});
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

// The disk and PCI rules read the store's digest (grouped on the name, split at reboots) instead of
// the whole history: over a history with repeats on both sides of several reboots they reach the
// verdict, counts included, that the whole history gives.
TEST(KernelLogHistory, DiskAndPciVerdictsFromTheDigestAreTheWholeHistorys) {
  auto db = store::Database::open_in_memory();
  ASSERT_TRUE(db.ok()) << db.error().message;
  store::EventStore events(**db);
  auto add = [&](const std::string& component, const std::string& name, int64_t s) {
    Event e;
    e.component = component;
    e.name = name;
    e.time = from_unix_seconds(s);
    e.message = name + " at " + std::to_string(s);
    e.extra_info = {{"at", s}};  // each its own row, as the kernel log's records are
    ASSERT_TRUE(events.insert(e).value_or(false));
  };
  const int64_t t0 = to_unix_seconds(Clock::now()) - 3 * 86400;
  for (int64_t reboot : {t0 + 1000, t0 + 5000, t0 + 9000}) add("os", "reboot", reboot);
  for (int64_t i = 0; i < 400; ++i) {
    add("disk", i % 3 == 0 ? "nvme_timeout" : "buffer_io_error", t0 + 100 + i * 25);
    add("pci", i % 4 == 0 ? "pcie_aer_uncorrected_fatal" : "pcie_aer_corrected", t0 + 90 + i * 25);
    if (i % 5 == 0) add("pci", "pcie_aer_uncorrected_nonfatal", t0 + 95 + i * 25);
  }
  Config config;
  ComponentContext ctx;
  ctx.config = &config;
  ctx.events = &events;
  for (const std::string component : {"disk", "pci"}) {
    auto whole = kernel_log_history(ctx, component, TimePoint{});
    auto digest = kernel_log_digest(ctx, component, TimePoint{}, {}, 1);
    ASSERT_TRUE(whole && digest);
    EXPECT_LT(digest->digest.events.size(), whole->events.size() / 4) << component;
    const bool disk = component == "disk";
    const KernelLogVerdict a = disk ? evaluate_disk_events(whole->events, whole->reboots)
                                    : evaluate_pci(whole->events, whole->reboots);
    const KernelLogVerdict b =
        disk ? evaluate_disk_events(digest->digest.events, digest->reboots, digest->digest.counts)
             : evaluate_pci(digest->digest.events, digest->reboots, digest->digest.counts);
    EXPECT_NE(a.health, Health::kHealthy) << component << ": " << a.reason;
    EXPECT_EQ(a.health, b.health) << component;
    EXPECT_EQ(a.reason, b.reason) << component;
    ASSERT_EQ(a.actions.has_value(), b.actions.has_value()) << component;
    if (a.actions) {
      EXPECT_EQ(a.actions->repair_actions, b.actions->repair_actions) << component;
    }
  }
}

}  // namespace
}  // namespace gpud::components
