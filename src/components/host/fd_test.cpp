#include "components/host/fd.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

namespace gpud::components {
namespace {

std::string fixture_root(const std::string& name) {
  return std::string(GPUD_SOURCE_DIR) + "/testing/fixtures/host/" + name;
}

FdSnapshot snap(uint64_t allocated, uint64_t max) {
  FdSnapshot s;
  s.allocated_file_handles = allocated;
  s.file_max = max;
  return s;
}

TEST(FdRule, LowUsageIsHealthy) {
  CheckResult r = evaluate_fd(snap(1000, 100000));
  EXPECT_EQ(r.health(), Health::kHealthy);
  EXPECT_FALSE(r.states[0].suggested_actions.has_value());
  EXPECT_EQ(r.states[0].reason, "1000 of 100000 file handles allocated (1.00%)");
}

TEST(FdRule, ExactlyEightyPercentIsHealthy) {
  EXPECT_EQ(evaluate_fd(snap(80, 100)).health(), Health::kHealthy);
}

TEST(FdRule, AboveEightyPercentIsDegradedWithUserAppAction) {
  CheckResult r = evaluate_fd(snap(81, 100));
  EXPECT_EQ(r.health(), Health::kDegraded);
  ASSERT_TRUE(r.states[0].suggested_actions.has_value());
  EXPECT_EQ(r.states[0].suggested_actions->description,
            "check/restart user applications for leaky file descriptors");
  EXPECT_EQ(r.states[0].suggested_actions->repair_actions,
            std::vector<RepairAction>{RepairAction::kCheckUserAppAndGpu});
}

TEST(FdRule, AboveNinetyFivePercentIsUnhealthy) {
  CheckResult r = evaluate_fd(snap(96, 100));
  EXPECT_EQ(r.health(), Health::kUnhealthy);
  EXPECT_TRUE(r.states[0].suggested_actions.has_value());
  EXPECT_NE(r.states[0].reason.find("above 95%"), std::string::npos);
}

TEST(FdRule, ZeroLimitIsHealthyZeroPercent) {
  EXPECT_EQ(evaluate_fd(snap(10, 0)).health(), Health::kHealthy);
}

TEST(FdRule, CollectionFailureIsUnhealthyWithError) {
  CheckResult r = evaluate_fd(Result<FdSnapshot>(make_error("open file-nr: denied")));
  EXPECT_EQ(r.health(), Health::kUnhealthy);
  EXPECT_EQ(r.states[0].error, "open file-nr: denied");
}

TEST(FdComponent, NearLimitFixtureIsUnhealthyAndPublishesMetrics) {
  Config cfg;
  cfg.host_root = fixture_root("fd-near-limit");
  MetricRegistry metrics;
  ComponentContext ctx{&cfg, nullptr, &metrics, false};
  FdComponent c(ctx);
  EXPECT_EQ(c.name(), "fd");
  CheckResult r = c.check();
  EXPECT_EQ(r.health(), Health::kUnhealthy) << r.summary();
  auto data = r.states[0].data;
  EXPECT_EQ(data["allocated_file_handles"], 97000);
  EXPECT_EQ(data["file_max"], 100000);
  std::string text = metrics.prometheus_text();
  EXPECT_NE(text.find("fd_allocated_file_handles{gpud_component=\"fd\"} 97000"), std::string::npos)
      << text;
  EXPECT_NE(text.find("fd_file_max{gpud_component=\"fd\"} 100000"), std::string::npos);
  EXPECT_NE(text.find("fd_used_percent{gpud_component=\"fd\"} 97"), std::string::npos);
}

// file-nr unreadable after a good check: Unhealthy, and the gauges go away rather than keep the
// last values.
TEST(FdComponent, AnUnreadableFileNrDropsTheGauges) {
  namespace fs = std::filesystem;
  const fs::path root = fs::temp_directory_path() / ("gpud-fd-" + std::to_string(::getpid()));
  fs::create_directories(root / "proc/sys/fs");
  fs::copy_file(fixture_root("fd-near-limit") + "/proc/sys/fs/file-nr",
                root / "proc/sys/fs/file-nr", fs::copy_options::overwrite_existing);
  Config cfg;
  cfg.host_root = root.string();
  MetricRegistry metrics;
  ComponentContext ctx{&cfg, nullptr, &metrics, false};
  FdComponent c(ctx);
  c.check();
  EXPECT_NE(metrics.prometheus_text().find("fd_allocated_file_handles{"), std::string::npos);
  fs::remove(root / "proc/sys/fs/file-nr");
  CheckResult r = c.check();
  EXPECT_EQ(r.health(), Health::kUnhealthy) << r.summary();
  const std::string text = metrics.prometheus_text();
  for (const char* name : {"fd_allocated_file_handles{", "fd_file_max{", "fd_used_percent{"})
    EXPECT_EQ(text.find(name), std::string::npos) << name << "\n" << text;
  fs::remove_all(root);
}

TEST(FdComponent, RecordedDebianFixtureIsHealthy) {
  Config cfg;
  cfg.host_root = fixture_root("debian12");
  ComponentContext ctx{&cfg, nullptr, nullptr, false};
  FdComponent c(ctx);
  EXPECT_EQ(c.check().health(), Health::kHealthy);
}

}  // namespace
}  // namespace gpud::components
