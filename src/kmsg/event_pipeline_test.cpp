#include "kmsg/event_pipeline.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <future>
#include <set>
#include <stdexcept>

#include "store/database.h"
#include "store/event_store.h"
#include "testing/log_capture.h"

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

// Two components of the test's own: "gpu-faults" ("GPU fault on <bus>", counted per bus) and
// "host-faults" ("disk fault <dev>"). The pipeline knows no real component.
std::vector<ComponentRules> test_rules() {
  ComponentRules gpu;
  gpu.component = "gpu-faults";
  gpu.lines.push_back({{{"GPU fault on"}}, [](std::string_view line) -> std::optional<Match> {
                         const auto at = line.find("GPU fault on ");
                         if (at == std::string_view::npos) return std::nullopt;
                         Match m;
                         m.name = "gpu_fault";
                         m.type = EventType::kFatal;
                         m.message = std::string(line.substr(at));
                         m.extra_info["pci_bus_id"] = std::string(line.substr(at + 13, 12));
                         return m;
                       }});
  gpu.describe_metrics = [](MetricRegistry& m) {
    m.describe("test_gpu_faults_total", "GPU faults by bus", MetricKind::kCounter);
  };
  gpu.count = [](MetricRegistry& m, const StoredMatch& s) {
    m.add("gpu-faults", "test_gpu_faults_total", 1,
          {{"pci_bus_id", std::string(s.bus_label)}, {"uuid", std::string(s.uuid)}});
  };
  ComponentRules host;
  host.component = "host-faults";
  host.lines.push_back(pattern_rule({{"disk fault"}}, "disk_fault", R"(disk fault (\S+))",
                                    "disk fault on {}", "dev"));
  return {gpu, host};
}

std::string gpu_fault(std::string_view bus) { return "xx GPU fault on " + std::string(bus); }

// The node has one GPU, GPU-abc at 0000:3b:00.0.
BusIdentityTable gpu_abc_at_3b() { return {{{"0000:3b:00.0", "GPU-abc"}}}; }

TEST(EventPipeline, MatchBecomesStoredEventCountedByItsOwnerAndTriggered) {
  Fixture f;
  EventPipeline d(test_rules(), f.events, f.metrics,
                  [&](std::string_view c) { f.triggered.emplace_back(c); });
  d.set_bus_identities(gpu_abc_at_3b());
  EXPECT_EQ(d.feed_message(gpu_fault("0000:3b:00.0"), kT), 1);
  auto ev = f.events.query("gpu-faults", TimePoint{}, TimePoint::max());
  ASSERT_TRUE(ev);
  ASSERT_EQ(ev->size(), 1u);
  const Event& e = ev->front();
  EXPECT_EQ(e.name, "gpu_fault");
  EXPECT_EQ(e.type, EventType::kFatal);
  EXPECT_EQ(e.time, std::chrono::time_point_cast<std::chrono::seconds>(kT));
  EXPECT_EQ(e.extra_info["pci_bus_id"], "0000:3b:00.0");
  EXPECT_EQ(e.extra_info["gpu_uuid"], "GPU-abc");
  EXPECT_EQ(f.triggered, std::vector<std::string>{"gpu-faults"});
  const std::string text = f.metrics.prometheus_text();
  EXPECT_NE(text.find("# HELP test_gpu_faults_total GPU faults by bus"), std::string::npos) << text;
  EXPECT_NE(text.find("test_gpu_faults_total{gpud_component=\"gpu-faults\",pci_bus_id=\"0000:3b:"
                      "00.0\",uuid=\"GPU-abc\"} 1"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("gpud_kernel_log_events_total{component=\"gpu-faults\",type=\"Fatal\"} 1"),
            std::string::npos)
      << text;
}

// The bus table is data the pipeline holds: a table handed over between two lines names the
// second line's GPU (the line's bus id written in any form), and one that drops the GPU makes the
// next line's bus unknown again. Nothing is asked of the caller while a line is read.
TEST(EventPipeline, TheTableHandedOverBetweenTwoLinesNamesTheSecondLinesGpu) {
  Fixture f;
  EventPipeline d(test_rules(), f.events, f.metrics, {});
  EXPECT_EQ(d.feed_message(gpu_fault("0000:3b:00.0"), kT), 1);
  d.set_bus_identities(gpu_abc_at_3b());
  EXPECT_EQ(d.feed_message(gpu_fault("0000:3B:00.0"), kT), 1);
  d.set_bus_identities({});
  EXPECT_EQ(d.feed_message(gpu_fault("0000:3b:00.0"), kT + std::chrono::minutes(2)), 1);
  auto ev = f.events.query("gpu-faults", TimePoint{}, TimePoint::max());
  ASSERT_TRUE(ev);
  ASSERT_EQ(ev->size(), 3u);
  int named = 0;
  for (const Event& e : *ev) {
    const bool upper = e.message.find("3B") != std::string::npos;
    EXPECT_EQ(e.extra_info.value("gpu_uuid", ""), upper ? "GPU-abc" : "") << e.message;
    named += upper;
  }
  EXPECT_EQ(named, 1);
  const std::string text = f.metrics.prometheus_text();
  EXPECT_NE(text.find("pci_bus_id=\"unknown\",uuid=\"\"} 2"), std::string::npos) << text;
  EXPECT_NE(text.find("uuid=\"GPU-abc\"} 1"), std::string::npos) << text;
}

// Whether another thread can take the pipeline's lock within 5 s (a counter's read takes it).
bool lock_is_free(const EventPipeline& d) {
  auto other = std::async(std::launch::async, [&d] { return d.matched(); });
  return other.wait_for(std::chrono::seconds(5)) == std::future_status::ready;
}

// What a line's event calls of the caller and of its owner (the annotation, the counter, the
// caller's on_event) runs with the pipeline's lock released: such a call may take locks of its
// own, or call back into the pipeline, without a deadlock.
TEST(EventPipeline, NoHookRunsUnderTheLock) {
  Fixture f;
  std::vector<std::string> held;
  const EventPipeline* pipeline = nullptr;
  auto check = [&](const char* hook) {
    if (!lock_is_free(*pipeline)) held.emplace_back(hook);
  };
  std::vector<ComponentRules> rules = test_rules();
  rules[0].annotate = [&](Match& m, const MatchTime&) {
    check("annotate");
    m.extra_info["annotated"] = true;
  };
  auto count = rules[0].count;
  rules[0].count = [&, count](MetricRegistry& r, const StoredMatch& s) {
    check("count");
    count(r, s);
  };
  int events = 0;
  EventPipeline d(rules, f.events, f.metrics, [&](std::string_view) {
    check("on_event");
    ++events;
  });
  pipeline = &d;
  EXPECT_EQ(d.feed_message(gpu_fault("0000:3b:00.0"), kT), 1);
  Match nvml;
  nvml.component = "gpu-faults";
  nvml.name = "gpu_fault";
  nvml.message = "GPU fault on 0000:5e:00.0";
  nvml.extra_info = {{"pci_bus_id", "0000:5e:00.0"}, {"gpu_uuid", "GPU-5e"}};
  EXPECT_EQ(d.dispatch(nvml, kT), 1);
  EXPECT_EQ(events, 2);
  EXPECT_TRUE(held.empty()) << "called under the lock: " << held.front();
  auto ev = f.events.query("gpu-faults", TimePoint{}, TimePoint::max());
  ASSERT_TRUE(ev);
  ASSERT_EQ(ev->size(), 2u);
  for (const Event& e : *ev) EXPECT_EQ(e.extra_info["annotated"], true) << e.message;
}

// A record that makes anything downstream throw is counted and dropped; the next record is
// dispatched as usual.
TEST(EventPipeline, ThrowDuringARecordIsCountedAndTheNextRecordFlows) {
  Fixture f;
  int calls = 0;
  EventPipeline d(test_rules(), f.events, f.metrics, [&](std::string_view) {
    if (++calls == 1) throw std::runtime_error("consumer failed");
  });
  EXPECT_EQ(d.feed_message(gpu_fault("0000:3b:00.0"), kT), 0);
  EXPECT_EQ(d.parse_errors(), 1u);
  EXPECT_EQ(d.feed_message(gpu_fault("0000:3c:00.0"), kT), 1);
  EXPECT_EQ(d.parse_errors(), 1u);
}

// A flood of records that throw is counted whole but logged once a minute at most.
TEST(EventPipeline, RecordsThatThrowAreLoggedAtMostOnceAMinute) {
  Fixture f;
  testing::LogCapture log("kmsg");
  EventPipeline d(test_rules(), f.events, f.metrics,
                  [](std::string_view) { throw std::runtime_error("consumer failed"); });
  for (int i = 0; i < 500; ++i) d.feed_message(gpu_fault("0000:3b:" + std::to_string(i)), kT);
  EXPECT_EQ(d.parse_errors(), 500u);
  EXPECT_EQ(log.count("kernel-log record skipped"), 1u) << log.text();
  EXPECT_NE(log.text().find("consumer failed"), std::string::npos) << log.text();
}

TEST(EventPipeline, IdenticalMessageWithinAMinuteIsOneEvent) {
  Fixture f;
  EventPipeline d(test_rules(), f.events, f.metrics, {});
  EXPECT_EQ(d.feed_message(gpu_fault("0000:3b:00.0"), kT), 1);
  EXPECT_EQ(d.feed_message(gpu_fault("0000:3b:00.0"), kT + std::chrono::seconds(30)), 0);
  EXPECT_EQ(d.feed_message(gpu_fault("0000:3b:00.0"), kT + std::chrono::seconds(90)), 1);
  EXPECT_EQ(d.stored(), 2u);
}

TEST(EventPipeline, RingReReadAfterRestartIsNoNewEvent) {
  Fixture f;
  {
    EventPipeline d(test_rules(), f.events, f.metrics, {});
    EXPECT_EQ(d.feed_message(gpu_fault("0000:3b:00.0"), kT), 1);
  }
  EventPipeline again(test_rules(), f.events, f.metrics, {});
  EXPECT_EQ(again.feed_message(gpu_fault("0000:3b:00.0"), kT + std::chrono::milliseconds(200)), 0);
  EXPECT_EQ(f.events.query("", TimePoint{}, TimePoint::max())->size(), 1u);
}

TEST(EventPipeline, RecordAtOrBeforeTheWatermarkIsStoredAcknowledgedAfterARestart) {
  Fixture f;
  const Acknowledgement ack{kT + std::chrono::minutes(1), "uid:0"};
  KernelLogWatermark w;
  {
    EventPipeline d(test_rules(), f.events, f.metrics, {});
    d.set_boot_id("boot-a");
    EXPECT_EQ(d.feed_message(gpu_fault("0000:3b:00.0"), kT, kT, 2'000'000), 1);
    d.feed_message("unrelated line", kT, kT, 3'000'000);
    w = d.watermark_now(ack);
  }
  EXPECT_EQ(w.boot_id, "boot-a");
  EXPECT_EQ(w.boot_offset_us, 3'000'000) << "the newest record read, matched or not";
  ASSERT_TRUE(f.events.purge("", TimePoint::max()));  // as if the stored row were gone

  EventPipeline again(test_rules(), f.events, f.metrics, {});
  again.set_boot_id("boot-a");
  again.set_watermark("gpu-faults", w);
  // Re-read with a wall time a second off (the boot-time estimate moved): still acknowledged.
  EXPECT_EQ(
      again.feed_message(gpu_fault("0000:3b:00.0"), kT + std::chrono::seconds(1), kT, 2'000'000),
      1);
  // A new fault after the watermark is not.
  EXPECT_EQ(again.feed_message(gpu_fault("0000:5e:00.0"), kT, kT, 4'000'000), 1);
  auto stored = f.events.query("gpu-faults", TimePoint{}, TimePoint::max());
  ASSERT_TRUE(stored);
  ASSERT_EQ(stored->size(), 2u);
  for (const Event& e : *stored) {
    const bool old = e.message.find("3b:00.0") != std::string::npos;
    EXPECT_EQ(e.acknowledged.has_value(), old) << e.message;
    if (old) {
      EXPECT_EQ(e.acknowledged->by, "uid:0");
    }
  }
}

TEST(EventPipeline, WatermarkOfAnotherBootAcknowledgesNothing) {
  Fixture f;
  EventPipeline d(test_rules(), f.events, f.metrics, {});
  d.set_boot_id("boot-b");
  d.set_watermark("gpu-faults", {"boot-a", 9'000'000, {kT + std::chrono::hours(1), "token"}});
  EXPECT_EQ(d.feed_message(gpu_fault("0000:3b:00.0"), kT, kT, 1'000'000), 1);
  auto stored = f.events.query("gpu-faults", TimePoint{}, TimePoint::max());
  ASSERT_TRUE(stored);
  ASSERT_EQ(stored->size(), 1u);
  EXPECT_FALSE(stored->front().acknowledged);
}

// Only the components whose rules the pipeline runs get events: a match made elsewhere (NVML's
// stream) for a component that is not running is counted as matched and dropped.
TEST(EventPipeline, ComponentsNotRunningAreDropped) {
  Fixture f;
  std::vector<ComponentRules> gpu_only = test_rules();
  gpu_only.pop_back();  // "host-faults" does not run
  EventPipeline d(gpu_only, f.events, f.metrics, {});
  EXPECT_EQ(d.feed_message("disk fault sda", kT), 0);
  EXPECT_EQ(d.matched(), 0u) << "no rule of a running component matches the line";
  Match host;
  host.component = "host-faults";
  host.name = "disk_fault";
  host.message = "disk fault on sda";
  EXPECT_EQ(d.dispatch(host, kT), 0);
  EXPECT_EQ(d.matched(), 1u);
  EXPECT_TRUE(f.events.query("", TimePoint{}, TimePoint::max())->empty());
}

TEST(EventPipeline, EventsGoToTheComponentThatDeclaredTheRule) {
  Fixture f;
  EventPipeline d(test_rules(), f.events, f.metrics, {});
  d.feed_message("disk fault nvme0n1", kT);
  d.feed_message(gpu_fault("0000:05:00.0"), kT);
  std::set<std::string> comps;
  auto all = f.events.query("", TimePoint{}, TimePoint::max());
  ASSERT_TRUE(all);
  for (const Event& e : *all) comps.insert(e.component);
  EXPECT_EQ(comps, (std::set<std::string>{"gpu-faults", "host-faults"}));
  auto host = f.events.query("host-faults", TimePoint{}, TimePoint::max());
  ASSERT_TRUE(host);
  ASSERT_EQ(host->size(), 1u);
  EXPECT_EQ(host->front().message, "disk fault on nvme0n1");
  EXPECT_EQ(host->front().extra_info["dev"], "nvme0n1");
}

// Lines naming bus ids that are none of the node's devices reach the owner's counters under one
// label: a flood of crafted lines cannot add a series each. The events keep the bus id the line
// named.
TEST(EventPipeline, UnknownBusesReachTheCountersAsOneLabel) {
  Fixture f;
  EventPipeline d(test_rules(), f.events, f.metrics, {});
  d.set_bus_identities(gpu_abc_at_3b());
  for (int i = 0; i < 200; ++i) {
    char pci[32];
    std::snprintf(pci, sizeof pci, "%04x:%02x:00.0", 0x1000 + i, i % 256);
    EXPECT_EQ(d.feed_message(gpu_fault(pci), kT), 1) << pci;
  }
  d.feed_message(gpu_fault("0000:3b:00.0"), kT);
  const std::string text = f.metrics.prometheus_text();
  EXPECT_NE(text.find("pci_bus_id=\"unknown\",uuid=\"\"} 200"), std::string::npos) << text;
  EXPECT_NE(text.find("pci_bus_id=\"0000:3b:00.0\",uuid=\"GPU-abc\"} 1"), std::string::npos)
      << text;
  auto ev = f.events.query("gpu-faults", TimePoint{}, TimePoint::max());
  ASSERT_TRUE(ev);
  std::set<std::string> buses;
  for (const Event& e : *ev) buses.insert(e.extra_info.value("pci_bus_id", ""));
  EXPECT_EQ(buses.size(), 201u);
  EXPECT_EQ(buses.count("unknown"), 0u);
}

// A line with no time is stored at the reader's clock (an event needs a time) and says so, so that
// no report passes the reader's clock off as the fault's.
TEST(EventPipeline, RecordWithoutTimeUsesNowAndSaysTheTimeIsUnknown) {
  Fixture f;
  EventPipeline d(test_rules(), f.events, f.metrics, {});
  d.feed_message(gpu_fault("0000:3b:00.0"), std::nullopt, kT);
  const Event e = f.events.query("", TimePoint{}, TimePoint::max())->front();
  EXPECT_EQ(e.time, std::chrono::time_point_cast<std::chrono::seconds>(kT));
  EXPECT_EQ(e.extra_info["time_known"], false);
  EXPECT_FALSE(e.extra_info.contains("boot_offset_seconds"));
  d.feed_message(gpu_fault("0000:3c:00.0"), kT, kT);
  EXPECT_FALSE(
      f.events.query("", TimePoint{}, TimePoint::max())->front().extra_info.contains("time_known"));
}

// A saved log of an unknown boot: each line's offset since boot is its time. Repeats of a line are
// dropped within a minute of *that* time, not of the reader's clock, so an hour of repeats read in
// one second is an hour of events.
TEST(EventPipeline, RepeatsAreDroppedOnlyWithinAMinuteOfTheirOwnBootOffset) {
  Fixture f;
  EventPipeline d(test_rules(), f.events, f.metrics, {});
  const std::string line = gpu_fault("0000:3b:00.0");
  EXPECT_EQ(d.feed_message(line, std::nullopt, kT, 1'005'030'000), 1);
  EXPECT_EQ(d.feed_message(line, std::nullopt, kT, 1'035'000'000), 0) << "30 s later: a repeat";
  EXPECT_EQ(d.feed_message(line, std::nullopt, kT, 1'105'000'000), 1) << "100 s later: new";
  EXPECT_EQ(d.feed_message(line, std::nullopt, kT, 3'605'000'000), 1);
  auto events = *f.events.query("", TimePoint{}, TimePoint::max());
  ASSERT_EQ(events.size(), 3u);
  std::set<double> offsets;
  for (const Event& e : events) {
    offsets.insert(e.extra_info.value("boot_offset_seconds", -1.0));
    EXPECT_EQ(e.extra_info["time_known"], false);
  }
  EXPECT_EQ(offsets, (std::set<double>{1005.03, 1105.0, 3605.0}));
}

// Rules whose matches name an Xid code and a bus: what the post-mortem summary counts.
std::vector<ComponentRules> xid_rules() {
  ComponentRules xid;
  xid.component = "xids";
  xid.lines.push_back({{{"Xid "}}, [](std::string_view line) -> std::optional<Match> {
                         // "Xid <code> on <bus>"
                         const auto at = line.find("Xid ");
                         const auto on = line.find(" on ");
                         if (at == std::string_view::npos || on == std::string_view::npos)
                           return std::nullopt;
                         Match m;
                         m.name = "error_xid";
                         m.type = EventType::kFatal;
                         m.message = std::string(line.substr(at));
                         m.extra_info["xid"] =
                             std::stoi(std::string(line.substr(at + 4, on - at - 4)));
                         m.extra_info["pci_bus_id"] = std::string(line.substr(on + 4));
                         return m;
                       }});
  return {xid};
}

// Every occurrence is counted per device and code, the repeats the deduper drops too, with the
// first and last time each was seen; without keep_occurrences() nothing is kept.
TEST(EventPipeline, OccurrencesCountEveryRepeatPerDeviceAndCode) {
  Fixture f;
  EventPipeline quiet(xid_rules(), f.events, f.metrics, {});
  quiet.feed_message("Xid 79 on 0000:db:00.0", kT);
  EXPECT_TRUE(quiet.occurrences().empty());

  Fixture g;
  EventPipeline d(xid_rules(), g.events, g.metrics, {});
  d.keep_occurrences();
  for (int64_t s : {100, 110, 120})
    d.feed_message("Xid 79 on 0000:db:00.0", std::nullopt, kT, s * 1'000'000);
  d.feed_message("Xid 8 on 0000:db:00.0", std::nullopt, kT, 130'000'000);
  d.feed_message("Xid 48 on 0000:3b:00.0", kT, kT, 140'000'000);
  EXPECT_EQ(d.stored(), 3u) << "two of the three Xid 79 lines are repeats within a minute";
  auto occ = d.occurrences();
  ASSERT_EQ(occ.size(), 3u);
  EXPECT_EQ(occ[0].pci_bus_id, "0000:3b:00.0");
  EXPECT_EQ(occ[0].count, 1u);
  EXPECT_EQ(occ[0].first_time, kT);
  EXPECT_EQ(occ[1].code, 8) << "codes in numeric order";
  EXPECT_EQ(occ[2].code, 79);
  EXPECT_EQ(occ[2].kind, "Xid");
  EXPECT_EQ(occ[2].count, 3u);
  EXPECT_EQ(occ[2].first_boot_offset_us, 100'000'000);
  EXPECT_EQ(occ[2].last_boot_offset_us, 120'000'000);
  EXPECT_FALSE(occ[2].first_time);
}

// A match made elsewhere (NVML's event stream) goes through the same dedup and counters; one that
// names its GPU keeps that UUID and a label of its own.
TEST(EventPipeline, DispatchedMatchIsDedupedWithTheLinesAndCounted) {
  Fixture f;
  EventPipeline d(test_rules(), f.events, f.metrics, {});
  EXPECT_EQ(d.feed_message(gpu_fault("0000:3b:00.0"), kT), 1);
  Match again;
  again.component = "gpu-faults";
  again.name = "gpu_fault";
  again.type = EventType::kFatal;
  again.message = "GPU fault on 0000:3b:00.0";
  again.extra_info = {{"pci_bus_id", "0000:3b:00.0"}, {"gpu_uuid", "GPU-x"}};
  EXPECT_EQ(d.dispatch(again, kT), 0) << "the same event in the same minute is a repeat";
  again.message = "GPU fault on 0000:3b:00.0 again";
  EXPECT_EQ(d.dispatch(again, kT), 1);
  EXPECT_NE(f.metrics.prometheus_text().find("pci_bus_id=\"0000:3b:00.0\",uuid=\"GPU-x\"} 1"),
            std::string::npos);
}

}  // namespace
}  // namespace gpud::kmsg
