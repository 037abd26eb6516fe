#include "components/host/memory.h"

#include <gtest/gtest.h>

namespace gpud::components {
namespace {

std::string fixture_root(const std::string& name) {
  return std::string(GPUD_SOURCE_DIR) + "/testing/fixtures/host/" + name;
}

TEST(MemoryRule, HealthyReasonCarriesUsedTotalAndAvailable) {
  MemorySnapshot s;
  s.total_bytes = 16ULL << 30;
  s.available_bytes = 12ULL << 30;
  s.free_bytes = 10ULL << 30;
  CheckResult r = evaluate_memory(s);
  EXPECT_EQ(r.health(), Health::kHealthy);
  EXPECT_EQ(r.states[0].reason, "memory used 4.0 GiB of 16.0 GiB (25.0%), 12.0 GiB available");
  auto data = nlohmann::json::parse(r.states[0].extra_info.at("data"));
  EXPECT_EQ(data["used_bytes"].get<uint64_t>(), 4ULL << 30);
  EXPECT_EQ(data["available_estimated"], false);
}

TEST(MemoryRule, EstimatedAvailableIsSaidInReason) {
  MemorySnapshot s;
  s.total_bytes = 1ULL << 30;
  s.available_bytes = 1ULL << 29;
  s.available_estimated = true;
  CheckResult r = evaluate_memory(s);
  EXPECT_EQ(r.health(), Health::kHealthy);
  EXPECT_NE(r.states[0].reason.find("estimated"), std::string::npos);
}

TEST(MemoryRule, CollectionFailureIsUnhealthyWithError) {
  CheckResult r = evaluate_memory(Result<MemorySnapshot>(make_error("/proc/meminfo: no MemTotal")));
  EXPECT_EQ(r.health(), Health::kUnhealthy);
  EXPECT_EQ(r.states[0].error, "/proc/meminfo: no MemTotal");
}

TEST(MemoryComponent, ReportsFixtureAndPublishesMetrics) {
  Config cfg;
  cfg.host_root = fixture_root("debian12");
  MetricRegistry metrics;
  ComponentContext ctx{&cfg, nullptr, &metrics, false};
  MemoryComponent c(ctx);
  EXPECT_EQ(c.name(), "memory");
  EXPECT_TRUE(c.can_set_healthy());
  CheckResult r = c.check();
  EXPECT_EQ(r.health(), Health::kHealthy) << r.summary();
  std::string text = metrics.prometheus_text();
  for (const char* name : {"memory_total_bytes", "memory_available_bytes", "memory_used_bytes",
                           "memory_free_bytes", "memory_used_percent"}) {
    EXPECT_NE(text.find(std::string(name) + "{gpud_component=\"memory\"}"), std::string::npos)
        << name << "\n"
        << text;
  }
  EXPECT_NE(text.find("memory_total_bytes{gpud_component=\"memory\"} 25276026880"),
            std::string::npos)
      << text;
}

TEST(MemoryComponent, OldKernelIsHealthyWithEstimate) {
  Config cfg;
  cfg.host_root = fixture_root("old-kernel");
  MetricRegistry metrics;
  ComponentContext ctx{&cfg, nullptr, &metrics, false};
  MemoryComponent c(ctx);
  CheckResult r = c.check();
  EXPECT_EQ(r.health(), Health::kHealthy);
  EXPECT_NE(r.states[0].reason.find("estimated"), std::string::npos);
  (void)c.check();  // second check: no second warning (not observable here, must not crash)
}

TEST(MemoryComponent, MissingMeminfoIsUnhealthy) {
  Config cfg;
  cfg.host_root = fixture_root("aggregate-only");
  ComponentContext ctx{&cfg, nullptr, nullptr, false};
  MemoryComponent c(ctx);
  CheckResult r = c.check();
  EXPECT_EQ(r.health(), Health::kUnhealthy);
  EXPECT_NE(r.states[0].error.find("meminfo"), std::string::npos);
}

}  // namespace
}  // namespace gpud::components
