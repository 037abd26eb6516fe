#include "components/self/gpud.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>

#include "core/time_util.h"

namespace gpud::components {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

GpudSnapshot healthy_snapshot() {
  GpudSnapshot s;
  s.db_path = "/var/lib/gpud/gpud.state";
  s.db_size_bytes = 3 * 1024 * 1024;
  s.event_backlog_capacity = 10000;
  s.kernel_log.followed = true;
  s.kernel_log.records = 1234;
  s.nvml_status = "ready";
  return s;
}

TEST(GpudRule, WritableStoreAndFollowedKernelLogIsHealthy) {
  CheckResult r = evaluate_gpud(healthy_snapshot(), {});
  EXPECT_EQ(r.health(), Health::kHealthy);
  EXPECT_EQ(r.states[0].name, "gpud");
  EXPECT_EQ(r.states[0].reason,
            "state database writable (3.0 MiB, /var/lib/gpud/gpud.state); kernel log followed "
            "(1234 records); NVML ready");
  auto data = r.states[0].data;
  EXPECT_EQ(data["db_size_bytes"], 3 * 1024 * 1024);
  EXPECT_EQ(data["kernel_log"]["records"], 1234);
}

TEST(GpudRule, EventsWaitingForTheStoreAreDegradedWithTheStoreError) {
  GpudSnapshot s = healthy_snapshot();
  s.store.writable = false;
  s.store.last_error = "insert: insert event: database or disk is full (13)";
  s.event_backlog = 20;
  CheckResult r = evaluate_gpud(s, {});
  EXPECT_EQ(r.health(), Health::kDegraded);
  EXPECT_THAT(r.states[0].reason,
              HasSubstr("state database cannot write (insert: insert event: database or disk is "
                        "full (13)); 20 events wait in memory"));
  EXPECT_EQ(r.states[0].error, s.store.last_error);
}

TEST(GpudRule, LostEventsAreUnhealthyUntilAcknowledged) {
  GpudSnapshot s = healthy_snapshot();
  s.store.writable = false;
  s.event_backlog = 10000;
  s.events_dropped = 7;
  CheckResult r = evaluate_gpud(s, {});
  EXPECT_EQ(r.health(), Health::kUnhealthy);
  // The worst finding comes first.
  EXPECT_THAT(r.states[0].reason, ::testing::StartsWith("7 events lost"));
  EXPECT_THAT(r.states[0].reason, HasSubstr("10000 events already waited"));
  GpudAcknowledged ack;
  ack.events_dropped = 7;
  EXPECT_EQ(evaluate_gpud(s, ack).health(), Health::kDegraded);  // still waiting, none lost since
}

TEST(GpudRule, UnusableStoreIsUnhealthy) {
  GpudSnapshot s = healthy_snapshot();
  s.store.usable = false;
  s.store.writable = false;
  s.store.last_error = "open a fresh database /d/gpud.state: disk I/O error";
  CheckResult r = evaluate_gpud(s, {});
  EXPECT_EQ(r.health(), Health::kUnhealthy);
  EXPECT_THAT(r.states[0].reason, HasSubstr("state database unusable (open a fresh database"));
}

TEST(GpudRule, QuarantineIsDegradedWithThePathUntilAcknowledged) {
  GpudSnapshot s = healthy_snapshot();
  s.store.quarantines.push_back({"/var/lib/gpud/gpud.state.corrupt-1700000000",
                                 from_unix_seconds(1700000000), "file is not a database"});
  s.quarantined_files = {"/var/lib/gpud/gpud.state.corrupt-1700000000"};
  CheckResult r = evaluate_gpud(s, {});
  EXPECT_EQ(r.health(), Health::kDegraded);
  EXPECT_THAT(r.states[0].reason,
              HasSubstr("state database was corrupt (file is not a database) and moved to "
                        "/var/lib/gpud/gpud.state.corrupt-1700000000 at 2023-11-14T22:13:20Z"));
  GpudAcknowledged ack;
  ack.quarantines = 1;
  CheckResult after = evaluate_gpud(s, ack);
  EXPECT_EQ(after.health(), Health::kHealthy);
  // The file stays listed while it is on disk.
  auto data = after.states[0].data;
  EXPECT_EQ(data["quarantined_files"].size(), 1u);
}

TEST(GpudRule, KernelLogNotFollowedOrLosingRecordsIsDegraded) {
  GpudSnapshot s = healthy_snapshot();
  s.kernel_log = {};
  s.kernel_log.error = "/dev/kmsg: Permission denied";
  CheckResult r = evaluate_gpud(s, {});
  EXPECT_EQ(r.health(), Health::kDegraded);
  EXPECT_THAT(r.states[0].reason,
              HasSubstr("kernel log not followed: /dev/kmsg: Permission denied"));

  s = healthy_snapshot();
  s.kernel_log.overruns = 3;
  s.kernel_log.read_errors = 1;
  s.kernel_log.record_errors = 2;
  s.kernel_log.parse_errors = 5;
  r = evaluate_gpud(s, {});
  EXPECT_EQ(r.health(), Health::kDegraded);
  EXPECT_THAT(r.states[0].reason, HasSubstr("kernel log: 3 records lost to ring buffer overruns"));
  EXPECT_THAT(r.states[0].reason, HasSubstr("kernel log: 1 read errors"));
  EXPECT_THAT(r.states[0].reason, HasSubstr("kernel log: 2 records could not be parsed"));
  EXPECT_THAT(r.states[0].reason, HasSubstr("kernel log: 5 matched lines could not be parsed"));
  GpudAcknowledged ack{0, 0, 3, 1, 2, 5};
  EXPECT_EQ(evaluate_gpud(s, ack).health(), Health::kHealthy);
  s.kernel_log.overruns = 4;
  EXPECT_THAT(evaluate_gpud(s, ack).states[0].reason,
              HasSubstr("kernel log: 1 records lost to ring buffer overruns"));
}

// What processes write to /dev/kmsg is dropped before any rule sees it: shown, and Healthy.
TEST(GpudRule, RecordsWrittenByProcessesAreShownNotJudged) {
  GpudSnapshot s = healthy_snapshot();
  s.kernel_log.foreign_records = 42;
  CheckResult r = evaluate_gpud(s, {});
  EXPECT_EQ(r.health(), Health::kHealthy);
  EXPECT_THAT(r.states[0].reason,
              HasSubstr("kernel log followed (1234 records, 42 written by processes ignored)"));
  auto data = r.states[0].data;
  EXPECT_EQ(data["kernel_log"]["foreign_records"], 42);
  s.kernel_log.foreign_records = 0;
  EXPECT_THAT(evaluate_gpud(s, {}).states[0].reason,
              HasSubstr("kernel log followed (1234 records)"));
}

TEST(GpudRule, NvmlStateIsReportedNotJudged) {
  GpudSnapshot s = healthy_snapshot();
  s.nvml_status = "errored";
  CheckResult r = evaluate_gpud(s, {});
  EXPECT_EQ(r.health(), Health::kHealthy);
  EXPECT_THAT(r.states[0].reason, HasSubstr("; NVML errored"));
}

TEST(GpudRule, ASinkThatCannotReachItsSystemIsDegradedWithItsError) {
  GpudSnapshot s = healthy_snapshot();
  s.sinks = {{"kubernetes-node-conditions", ""}};
  EXPECT_EQ(evaluate_gpud(s, {}).health(), Health::kHealthy);
  s.sinks[0].error = "PATCH /api/v1/nodes/n1/status: HTTP 403: forbidden";
  CheckResult r = evaluate_gpud(s, {});
  EXPECT_EQ(r.health(), Health::kDegraded);
  EXPECT_THAT(r.states[0].reason,
              HasSubstr("kubernetes-node-conditions: PATCH /api/v1/nodes/n1/status: HTTP 403: "
                        "forbidden"));
  auto data = r.states[0].data;
  EXPECT_EQ(data["sinks"][0]["ok"], false);
  EXPECT_EQ(data["sinks"][0]["name"], "kubernetes-node-conditions");
}

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "gpud-self-test-XXXXXX").string();
    if (mkdtemp(tmpl.data()) != nullptr) path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) fs::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

TEST(GpudComponent, QuarantineAtStartIsReportedPublishedAndAcknowledgedBySetHealthy) {
  TempDir dir;
  const std::string path = dir.path() + "/gpud.state";
  { std::ofstream(path, std::ios::binary) << std::string(8192, 'x'); }
  auto db = store::Database::open(path);
  ASSERT_TRUE(db.ok()) << db.error().message;
  MetricRegistry metrics;
  (*db)->set_metrics(&metrics);
  store::EventStore events(**db);
  GpudProbes probes{db->get(),
                    &events,
                    [] {
                      KernelLogCounters k;
                      k.followed = true;
                      k.foreign_records = 3;
                      return k;
                    },
                    {}};
  Config cfg;
  ComponentContext ctx{&cfg, &events, &metrics, false};
  ctx.gpud = &probes;
  GpudComponent c(ctx);
  ASSERT_TRUE(c.supported());

  CheckResult r = c.check();
  EXPECT_EQ(r.health(), Health::kDegraded);
  EXPECT_THAT(r.states[0].reason, HasSubstr("moved to " + (*db)->quarantined_path()));
  const std::string text = metrics.prometheus_text();
  EXPECT_THAT(text, HasSubstr("gpud_store_quarantined_files{gpud_component=\"gpud\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("gpud_store_writable{gpud_component=\"gpud\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("gpud_kernel_log_followed{gpud_component=\"gpud\"} 1\n"));
  EXPECT_THAT(text,
              HasSubstr("gpud_kernel_log_foreign_records_total{gpud_component=\"gpud\"} 3\n"));
  EXPECT_THAT(text, HasSubstr("gpud_store_quarantines_total 1\n"));

  ASSERT_TRUE(c.can_set_healthy());
  ASSERT_TRUE(c.set_healthy({Clock::now(), "uid:0"}).ok());
  EXPECT_EQ(c.check().health(), Health::kHealthy);
}

TEST(GpudComponent, StoreThatCannotWriteIsDegradedUntilTheEventsAreStored) {
  TempDir dir;
  auto db = store::Database::open(dir.path() + "/gpud.state");
  ASSERT_TRUE(db.ok());
  MetricRegistry metrics;
  (*db)->set_metrics(&metrics);
  store::EventStore events(**db);
  std::string sink_error;
  GpudProbes probes{db->get(), &events, {}, [&sink_error] {
                      return std::vector<SinkStatus>{{"kubernetes-node-conditions", sink_error}};
                    }};
  Config cfg;
  ComponentContext ctx{&cfg, &events, &metrics, false};
  ctx.gpud = &probes;
  GpudComponent c(ctx);

  // Writes refused as on a read-only mount.
  ASSERT_TRUE((*db)->exec("PRAGMA query_only = 1").ok());
  Event e;
  e.component = "os";
  e.time = Clock::now();
  e.name = "reboot";
  ASSERT_TRUE(events.insert(e).value_or(false));
  CheckResult r = c.check();
  EXPECT_EQ(r.health(), Health::kDegraded);
  EXPECT_THAT(r.states[0].reason, HasSubstr("1 events wait in memory"));
  EXPECT_THAT(r.states[0].reason, HasSubstr("readonly"));
  // Without a kernel-log probe (as here) the component says so.
  EXPECT_THAT(r.states[0].reason, HasSubstr("kernel log not followed"));
  EXPECT_THAT(metrics.prometheus_text(),
              HasSubstr("gpud_store_writable{gpud_component=\"gpud\"} 0\n"));

  ASSERT_TRUE((*db)->exec("PRAGMA query_only = 0").ok());
  EXPECT_EQ(events.retry(), 0u);
  r = c.check();
  EXPECT_THAT(r.states[0].reason, ::testing::Not(HasSubstr("cannot write")));
  EXPECT_THAT(r.states[0].reason, ::testing::Not(HasSubstr("kubernetes-node-conditions")));

  // A sink's failure, read at each check.
  sink_error = "GET /api/v1/nodes/n1: HTTP 401: Unauthorized";
  r = c.check();
  EXPECT_EQ(r.health(), Health::kDegraded);
  EXPECT_THAT(
      r.states[0].reason,
      HasSubstr("kubernetes-node-conditions: GET /api/v1/nodes/n1: HTTP 401: Unauthorized"));
  EXPECT_THAT(metrics.prometheus_text(),
              HasSubstr("gpud_store_writable{gpud_component=\"gpud\"} 1\n"));
}

// A counter the follower stops reporting is absent from the next scrape, not frozen at its last
// value.
TEST(GpudComponent, ACounterNoLongerReportedLosesItsSeries) {
  std::optional<uint64_t> record_errors = 2;
  GpudProbes probes{nullptr,
                    nullptr,
                    [&record_errors] {
                      KernelLogCounters k;
                      k.followed = true;
                      k.record_errors = record_errors;
                      k.parse_errors = 1;
                      return k;
                    },
                    {}};
  Config cfg;
  MetricRegistry metrics;
  ComponentContext ctx{&cfg, nullptr, &metrics, false};
  ctx.gpud = &probes;
  GpudComponent c(ctx);
  (void)c.check();
  std::string text = metrics.prometheus_text();
  EXPECT_THAT(text, HasSubstr("# TYPE gpud_kernel_log_record_errors_total counter\n"
                              "gpud_kernel_log_record_errors_total{gpud_component=\"gpud\"} 2\n"));

  record_errors.reset();
  (void)c.check();
  text = metrics.prometheus_text();
  EXPECT_THAT(text, ::testing::Not(HasSubstr("gpud_kernel_log_record_errors_total{")));
  EXPECT_THAT(text, HasSubstr("gpud_kernel_log_parse_errors_total{gpud_component=\"gpud\"} 1\n"));
  // Without an NVML source there is no NVML state to publish.
  EXPECT_THAT(text, ::testing::Not(HasSubstr("gpud_nvml_up{")));
}

TEST(GpudComponent, NotSupportedWithoutTheDaemonsProbesOrInScan) {
  Config cfg;
  ComponentContext ctx{&cfg, nullptr, nullptr, false};
  EXPECT_FALSE(GpudComponent(ctx).supported());
  GpudProbes probes;
  ctx.gpud = &probes;
  ctx.scan_mode = true;
  EXPECT_FALSE(GpudComponent(ctx).supported());
}

}  // namespace
}  // namespace gpud::components
