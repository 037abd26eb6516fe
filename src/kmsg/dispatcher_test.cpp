#include "kmsg/dispatcher.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <set>
#include <stdexcept>

#include "kmsg/writer.h"
#include "store/database.h"
#include "store/event_store.h"

namespace gpud::kmsg {
namespace {

std::unique_ptr<store::Database> memory_db() {
  auto r = store::Database::open_in_memory();
  return std::move(*r);
}

struct Fixture {
  std::unique_ptr<store::Database> db = memory_db();
  store::EventStore events{*db};
  MetricRegistry metrics;
  std::vector<std::string> triggered;
};

const TimePoint kT = Clock::from_time_t(1'700'000'000) + std::chrono::milliseconds(700);

TEST(Dispatcher, XidLineBecomesStoredEventWithMetricsAndTrigger) {
  Fixture f;
  KernelLogDispatcher d(
      f.events, f.metrics, [&](std::string_view c) { f.triggered.emplace_back(c); }, {},
      [](std::string_view bus) {
        return bus == "0000:3b:00.0" ? BusIdentity{true, "GPU-abc"} : BusIdentity{};
      });
  EXPECT_EQ(d.feed_message(xid_line(79, "0000:3b:00.0"), kT), 1);
  auto ev = f.events.query(kComponentXid, TimePoint{}, TimePoint::max());
  ASSERT_TRUE(ev);
  ASSERT_EQ(ev->size(), 1u);
  const Event& e = ev->front();
  EXPECT_EQ(e.name, "error_xid");
  EXPECT_EQ(e.type, EventType::kFatal);
  EXPECT_EQ(e.time, std::chrono::time_point_cast<std::chrono::seconds>(kT));
  EXPECT_EQ(e.extra_info["pci_bus_id"], "0000:3b:00.0");
  EXPECT_EQ(e.extra_info["xid"], 79);
  EXPECT_EQ(e.extra_info["gpu_uuid"], "GPU-abc");
  EXPECT_EQ(f.triggered, std::vector<std::string>{std::string(kComponentXid)});
  std::string text = f.metrics.prometheus_text();
  EXPECT_NE(text.find("accelerator_nvidia_xid_errors_total{gpud_component=\"accelerator-nvidia-"
                      "error-xid\",pci_bus_id=\"0000:3b:00.0\",type=\"Fatal\",uuid=\"GPU-abc\","
                      "xid=\"79\"} 1"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("gpud_kernel_log_events_total{component=\"accelerator-nvidia-error-xid\","
                      "type=\"Fatal\"} 1"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("accelerator_nvidia_xid_last_code{gpud_component=\"accelerator-nvidia-error-"
                      "xid\",pci_bus_id=\"0000:3b:00.0\",uuid=\"GPU-abc\"} 79"),
            std::string::npos)
      << text;
  // The gauge holds the latest code, the counters count each.
  EXPECT_EQ(d.feed_message(xid_line(48, "0000:3b:00.0"), kT), 1);
  text = f.metrics.prometheus_text();
  EXPECT_NE(text.find("accelerator_nvidia_xid_last_code{gpud_component=\"accelerator-nvidia-error-"
                      "xid\",pci_bus_id=\"0000:3b:00.0\",uuid=\"GPU-abc\"} 48"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("pci_bus_id=\"0000:3b:00.0\",type=\"Fatal\",uuid=\"GPU-abc\",xid=\"79\"} 1"),
            std::string::npos)
      << text;
}

// A record that makes anything downstream throw is counted and dropped; the next record is
// dispatched as usual.
TEST(Dispatcher, ThrowDuringARecordIsCountedAndTheNextRecordFlows) {
  Fixture f;
  int calls = 0;
  KernelLogDispatcher d(f.events, f.metrics, [&](std::string_view) {
    if (++calls == 1) throw std::runtime_error("consumer failed");
  });
  EXPECT_EQ(d.feed_message(xid_line(79, "0000:3b:00.0"), kT), 0);
  EXPECT_EQ(d.parse_errors(), 1u);
  EXPECT_EQ(d.feed_message(xid_line(79, "0000:3c:00.0"), kT), 1);
  EXPECT_EQ(d.parse_errors(), 1u);
}

TEST(Dispatcher, IdenticalMessageWithinAMinuteIsOneEvent) {
  Fixture f;
  KernelLogDispatcher d(f.events, f.metrics, {});
  EXPECT_EQ(d.feed_message(xid_line(79, "3b:00"), kT), 1);
  EXPECT_EQ(d.feed_message(xid_line(79, "3b:00"), kT + std::chrono::seconds(30)), 0);
  EXPECT_EQ(d.feed_message(xid_line(79, "3b:00"), kT + std::chrono::seconds(90)), 1);
  EXPECT_EQ(d.stored(), 2u);
}

TEST(Dispatcher, RingReReadAfterRestartIsNoNewEvent) {
  Fixture f;
  {
    KernelLogDispatcher d(f.events, f.metrics, {});
    EXPECT_EQ(d.feed_message(xid_line(48, "0000:3b:00.0"), kT), 1);
  }
  KernelLogDispatcher again(f.events, f.metrics, {});
  EXPECT_EQ(again.feed_message(xid_line(48, "0000:3b:00.0"), kT + std::chrono::milliseconds(200)),
            0);
  EXPECT_EQ(f.events.query("", TimePoint{}, TimePoint::max())->size(), 1u);
}

TEST(Dispatcher, ComponentsNotRunningAreDropped) {
  Fixture f;
  KernelLogDispatcher d(f.events, f.metrics, {},
                        [](std::string_view c) { return c != kComponentNvlink; });
  EXPECT_EQ(d.feed_message("NVRM: knvlinkUpdatePostRxDetectLinkMask_IMPL: Failed to update Rx "
                           "Detect Link mask!",
                           kT),
            0);
  EXPECT_EQ(d.matched(), 1u);
  EXPECT_EQ(d.feed_message("Out of memory nothing", kT), 0);
}

TEST(Dispatcher, HostEventsGoToTheirComponents) {
  Fixture f;
  KernelLogDispatcher d(f.events, f.metrics, {});
  d.feed_message("INFO: task kworker/u8:2:1234 blocked for more than 120 seconds.", kT);
  d.feed_message("Buffer I/O error on dev nvme0n1p1, logical block 0, async page read", kT);
  d.feed_message(sxid_line(20034, "0000:05:00.0"), kT);
  std::set<std::string> comps;
  auto all = f.events.query("", TimePoint{}, TimePoint::max());
  ASSERT_TRUE(all);
  for (const Event& e : *all) comps.insert(e.component);
  EXPECT_EQ(comps, (std::set<std::string>{"cpu", "disk", std::string(kComponentSxid)}));
  EXPECT_NE(f.metrics.prometheus_text().find("accelerator_nvidia_sxid_errors_total"),
            std::string::npos);
}

TEST(Dispatcher, XidAndSxidCountersCarryTheEventType) {
  Fixture f;
  KernelLogDispatcher d(f.events, f.metrics, {}, {}, [](std::string_view) {
    return BusIdentity{true, ""};
  });
  d.feed_message(xid_line(13, "0000:3b:00.0"), kT);  // catalog: Warning
  // Xid 145 is Warning in the catalog; this NVLink sub-code decodes to Fatal, and the label says
  // so.
  d.feed_message(
      "NVRM: Xid (PCI:0018:01:00): 145, RLW_REMAP Nonfatal XC0 i0 Link 12 (0x00000004 0x00000040 "
      "0x0 0x0)",
      kT);
  d.feed_message(sxid_line(20034, "0000:05:00.0"), kT);  // catalog: Fatal
  std::string text = f.metrics.prometheus_text();
  EXPECT_NE(text.find("pci_bus_id=\"0000:3b:00.0\",type=\"Warning\",uuid=\"\",xid=\"13\"} 1"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("pci_bus_id=\"0018:01:00.0\",type=\"Fatal\",uuid=\"\",xid=\"145\"} 1"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("accelerator_nvidia_sxid_errors_total{gpud_component=\"accelerator-nvidia-"
                      "error-sxid\",pci_bus_id=\"0000:05:00.0\",sxid=\"20034\",type=\"Fatal\""),
            std::string::npos)
      << text;
}

// Lines naming bus ids that are none of the node's devices share one series: a flood of crafted
// lines cannot add a series each. The events keep the bus id the line named.
TEST(Dispatcher, XidOnUnknownBusCountsUnderOneSeries) {
  Fixture f;
  KernelLogDispatcher d(f.events, f.metrics, {}, {}, [](std::string_view bus) {
    return bus == "0000:3b:00.0" ? BusIdentity{true, "GPU-abc"} : BusIdentity{};
  });
  for (int i = 0; i < 200; ++i) {
    char pci[32];
    std::snprintf(pci, sizeof pci, "%04x:%02x:00.0", 0x1000 + i, i % 256);
    EXPECT_EQ(d.feed_message(xid_line(79, pci), kT), 1) << pci;
  }
  d.feed_message(xid_line(79, "0000:3b:00.0"), kT);
  const std::string text = f.metrics.prometheus_text();
  size_t series = 0;
  for (size_t pos = 0;
       (pos = text.find("\naccelerator_nvidia_xid_errors_total{", pos)) != std::string::npos; ++pos)
    ++series;
  EXPECT_EQ(series, 2u) << text;
  EXPECT_NE(text.find("pci_bus_id=\"unknown\",type=\"Fatal\",uuid=\"\",xid=\"79\"} 200"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("pci_bus_id=\"0000:3b:00.0\",type=\"Fatal\",uuid=\"GPU-abc\",xid=\"79\"} 1"),
            std::string::npos)
      << text;
  auto ev = f.events.query(kComponentXid, TimePoint{}, TimePoint::max());
  ASSERT_TRUE(ev);
  ASSERT_EQ(ev->size(), 201u);
  std::set<std::string> buses;
  for (const Event& e : *ev) buses.insert(e.extra_info.value("pci_bus_id", ""));
  EXPECT_EQ(buses.size(), 201u);
  EXPECT_EQ(buses.count("unknown"), 0u);
}

TEST(Dispatcher, RecordWithoutTimeUsesNow) {
  Fixture f;
  KernelLogDispatcher d(f.events, f.metrics, {});
  d.feed_message(xid_line(79, "0000:3b:00.0"), std::nullopt, kT);
  EXPECT_EQ(f.events.query("", TimePoint{}, TimePoint::max())->front().time,
            std::chrono::time_point_cast<std::chrono::seconds>(kT));
}

// NVML's Xid is built directly (no kernel text rendered and parsed back) and carries the same
// meaning, message and fields as the kernel line of the same Xid, so the two dedupe.
TEST(Dispatcher, NvmlXidIsTheKernelLinesEventWithSourceAndUuid) {
  const auto kernel = match_message(xid_line(48, "0000:3b:00.0"));
  ASSERT_EQ(kernel.size(), 1u);
  Match n = nvml_xid_match(48, "00000000:3B:00.0", "GPU-x");
  EXPECT_EQ(n.message, kernel[0].message);
  EXPECT_EQ(n.type, kernel[0].type);
  nlohmann::json without = n.extra_info;
  without.erase("source");
  without.erase("gpu_uuid");
  nlohmann::json kernel_extra = kernel[0].extra_info;
  kernel_extra.erase("log_line");
  EXPECT_EQ(without, kernel_extra);
  EXPECT_FALSE(n.extra_info.contains("log_line"));
  Fixture f;
  KernelLogDispatcher d(f.events, f.metrics, {});
  EXPECT_EQ(d.feed_message(xid_line(48, "0000:3b:00.0"), kT), 1);
  EXPECT_EQ(d.dispatch(n, kT), 0)
      << "the NVML event of the same Xid in the same minute is a repeat";
  Match m = nvml_xid_match(79, "0000:3b:00.0", "GPU-x");
  EXPECT_EQ(m.component, kComponentXid);
  EXPECT_EQ(m.type, EventType::kFatal);
  EXPECT_EQ(m.extra_info["source"], "nvml");
  EXPECT_EQ(m.extra_info["gpu_uuid"], "GPU-x");
  EXPECT_EQ(m.extra_info["pci_bus_id"], "0000:3b:00.0");
  EXPECT_EQ(m.extra_info["xid"], 79);
}

}  // namespace
}  // namespace gpud::kmsg
