#include "components/host/cpu.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>

#include "components/kernel_log_test_util.h"

namespace gpud::components {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

std::string fixture_root(const std::string& name) {
  return std::string(GPUD_SOURCE_DIR) + "/testing/fixtures/host/" + name;
}

// A writable host root whose /proc/stat the test rewrites between checks.
class TempRoot {
 public:
  TempRoot() {
    std::string tmpl = (fs::temp_directory_path() / "gpud-cpu-XXXXXX").string();
    char* p = ::mkdtemp(tmpl.data());
    EXPECT_NE(p, nullptr);
    dir_ = tmpl;
    fs::create_directories(dir_ / "proc");
  }
  ~TempRoot() {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  void write(const std::string& rel, const std::string& text) {
    std::ofstream(dir_ / rel, std::ios::trunc) << text;
  }
  std::string path() const { return dir_.string(); }

 private:
  fs::path dir_;
};

TEST(CpuRule, HealthyReasonCarriesUsageLoadAndCores) {
  CpuSnapshot s;
  s.logical_cores = 8;
  s.used_percent = 12.34;
  s.load = {0.52, 0.40, 0.31, 2, 300};
  CheckResult r = evaluate_cpu(s);
  ASSERT_EQ(r.states.size(), 1u);
  EXPECT_EQ(r.states[0].health, Health::kHealthy);
  EXPECT_EQ(r.states[0].component, "cpu");
  EXPECT_EQ(r.states[0].reason, "cpu usage 12.3%, load average 0.52 0.40 0.31 (8 cores)");
  auto data = r.states[0].data;
  EXPECT_EQ(data["logical_cores"], 8);
  EXPECT_DOUBLE_EQ(data["used_percent"].get<double>(), 12.34);
  EXPECT_DOUBLE_EQ(data["load_avg_15m"].get<double>(), 0.31);
  EXPECT_NE(r.detail.find("logical cores: 8"), std::string::npos);
}

TEST(CpuRule, UnknownUsageIsStillHealthy) {
  CpuSnapshot s;
  CheckResult r = evaluate_cpu(s);
  EXPECT_EQ(r.health(), Health::kHealthy);
  EXPECT_NE(r.states[0].reason.find("n/a"), std::string::npos);
  EXPECT_NE(r.states[0].reason.find("cores unknown"), std::string::npos);
  EXPECT_TRUE(r.states[0].data["used_percent"].is_null());
}

TEST(CpuRule, CollectionFailureIsUnhealthyWithError) {
  CheckResult r = evaluate_cpu(Result<CpuSnapshot>(make_error("open /proc/stat: No such file")));
  EXPECT_EQ(r.health(), Health::kUnhealthy);
  EXPECT_EQ(r.states[0].error, "open /proc/stat: No such file");
}

TEST(CpuComponent, ReportsFixtureAndPublishesMetrics) {
  Config cfg;
  cfg.host_root = fixture_root("debian12");
  MetricRegistry metrics;
  ComponentContext ctx{&cfg, nullptr, &metrics, false};
  CpuComponent c(ctx);
  c.set_first_sample_delay(1ms);
  EXPECT_EQ(c.name(), "cpu");
  EXPECT_EQ(c.interval(), 60s);
  CheckResult r = c.check();
  EXPECT_EQ(r.health(), Health::kHealthy) << r.summary();
  EXPECT_NE(r.states[0].reason.find("(2 cores)"), std::string::npos) << r.states[0].reason;
  std::string text = metrics.prometheus_text();
  EXPECT_NE(text.find("cpu_load_average{gpud_component=\"cpu\",load_duration=\"1m0s\"}"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("load_duration=\"5m0s\""), std::string::npos);
  EXPECT_NE(text.find("load_duration=\"15m0s\""), std::string::npos);
  EXPECT_NE(text.find("# HELP cpu_load_average"), std::string::npos);
  // A recorded file does not change between samples: no usage yet, so no usage series.
  EXPECT_EQ(text.find("cpu_used_percent{"), std::string::npos);
}

TEST(CpuComponent, UsageIsTheDeltaAgainstThePreviousCheck) {
  TempRoot root;
  root.write("proc/loadavg", "1.00 0.50 0.25 1/100 42\n");
  root.write("proc/stat", "cpu  100 0 0 100 0 0 0 0\ncpu0 100 0 0 100 0 0 0 0\n");
  Config cfg;
  cfg.host_root = root.path();
  MetricRegistry metrics;
  ComponentContext ctx{&cfg, nullptr, &metrics, false};
  CpuComponent c(ctx);
  c.set_first_sample_delay(1ms);
  (void)c.check();
  root.write("proc/stat", "cpu  175 0 0 125 0 0 0 0\ncpu0 175 0 0 125 0 0 0 0\n");
  CheckResult r = c.check();
  EXPECT_NE(r.states[0].reason.find("cpu usage 75.0%"), std::string::npos) << r.states[0].reason;
  EXPECT_NE(metrics.prometheus_text().find("cpu_used_percent{gpud_component=\"cpu\"} 75"),
            std::string::npos)
      << metrics.prometheus_text();
}

// A failed read removes every cpu series: a scrape shows a gap, not the last values read.
TEST(CpuComponent, AFailedReadRemovesTheSeriesOfTheLastGoodRead) {
  TempRoot root;
  root.write("proc/loadavg", "1.00 0.50 0.25 1/100 42\n");
  root.write("proc/stat", "cpu  100 0 0 100 0 0 0 0\ncpu0 100 0 0 100 0 0 0 0\n");
  Config cfg;
  cfg.host_root = root.path();
  MetricRegistry metrics;
  ComponentContext ctx{&cfg, nullptr, &metrics, false};
  CpuComponent c(ctx);
  c.set_first_sample_delay(1ms);
  (void)c.check();
  root.write("proc/stat", "cpu  175 0 0 125 0 0 0 0\ncpu0 175 0 0 125 0 0 0 0\n");
  ASSERT_EQ(c.check().health(), Health::kHealthy);
  std::string text = metrics.prometheus_text();
  ASSERT_NE(text.find("cpu_used_percent{gpud_component=\"cpu\"} 75\n"), std::string::npos) << text;
  ASSERT_NE(text.find("cpu_load_average{gpud_component=\"cpu\",load_duration=\"1m0s\"} 1\n"),
            std::string::npos)
      << text;

  std::filesystem::remove(root.path() + "/proc/loadavg");
  root.write("proc/stat", "cpu  250 0 0 150 0 0 0 0\ncpu0 250 0 0 150 0 0 0 0\n");
  EXPECT_EQ(c.check().health(), Health::kUnhealthy);
  text = metrics.prometheus_text();
  EXPECT_EQ(text.find("cpu_used_percent{"), std::string::npos) << text;
  EXPECT_EQ(text.find("cpu_load_average{"), std::string::npos) << text;
}

// No usable delta between two samples: the usage is unknown, so its series goes, not its last
// value.
TEST(CpuComponent, AnUnknownUsageRemovesTheUsageSeries) {
  TempRoot root;
  root.write("proc/loadavg", "1.00 0.50 0.25 1/100 42\n");
  root.write("proc/stat", "cpu  100 0 0 100 0 0 0 0\ncpu0 100 0 0 100 0 0 0 0\n");
  Config cfg;
  cfg.host_root = root.path();
  MetricRegistry metrics;
  ComponentContext ctx{&cfg, nullptr, &metrics, false};
  CpuComponent c(ctx);
  c.set_first_sample_delay(1ms);
  (void)c.check();
  root.write("proc/stat", "cpu  175 0 0 125 0 0 0 0\ncpu0 175 0 0 125 0 0 0 0\n");
  (void)c.check();
  ASSERT_NE(metrics.prometheus_text().find("cpu_used_percent{"), std::string::npos);

  CheckResult r = c.check();  // the same counters again
  EXPECT_NE(r.states[0].reason.find("n/a"), std::string::npos) << r.states[0].reason;
  const std::string text = metrics.prometheus_text();
  EXPECT_EQ(text.find("cpu_used_percent{"), std::string::npos) << text;
  EXPECT_NE(text.find("cpu_load_average{"), std::string::npos) << text;
}

TEST(CpuComponent, MissingProcStatIsUnhealthy) {
  Config cfg;
  cfg.host_root = fixture_root("fd-near-limit");
  MetricRegistry metrics;
  ComponentContext ctx{&cfg, nullptr, &metrics, false};
  CpuComponent c(ctx);
  CheckResult r = c.check();
  EXPECT_EQ(r.health(), Health::kUnhealthy);
  EXPECT_NE(r.states[0].error.find("/proc/stat"), std::string::npos);
}

TEST(CpuKernelLogRule, HungTaskAndSoftLockup) {
  auto m = match_one(cpu_kernel_log_rules(),
                     "INFO: task kworker/u8:2:1234 blocked for more than 120 seconds.");
  EXPECT_EQ(m.component, "cpu");
  EXPECT_EQ(m.name, "cpu_blocked_too_long");
  EXPECT_EQ(m.extra_info["task"], "kworker/u8:2:1234");
  m = match_one(cpu_kernel_log_rules(),
                "watchdog: BUG: soft lockup - CPU#12 stuck for 23s! [python3:4567]");
  EXPECT_EQ(m.name, "cpu_soft_lockup");
  EXPECT_EQ(m.extra_info["task"], "python3:4567");
  EXPECT_TRUE(match_lines(cpu_kernel_log_rules(), {"task foo blocked for a while"}).empty());
}

}  // namespace
}  // namespace gpud::components
