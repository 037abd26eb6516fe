#include "components/snapshot_metric.h"

#include <gtest/gtest.h>

#include <map>

namespace gpud::components {
namespace {

struct Reading {
  std::optional<double> temp_c;
  uint64_t count = 0;
  std::map<std::string, double> by_zone;  // zone -> value
};

constexpr SnapshotMetric<Reading> kTable[] = {
    {.name = "test_temp_celsius",
     .help = "A temperature that may not be read",
     .value = [](const Reading& r) { return r.temp_c; }},
    {.name = "test_events_total",
     .help = "A count",
     .kind = MetricKind::kCounter,
     .value = [](const Reading& r) { return metric_value(r.count); }},
    {.name = "test_zone_value",
     .help = "One series a zone",
     .series =
         [](const Reading& r, MetricSeries& out) {
           for (const auto& [zone, v] : r.by_zone) out.emplace_back(Labels{{"zone", zone}}, v);
         }},
};
static_assert(valid_metric_table(kTable));

// A row that reads in both ways, or in none, or has no help, is refused at compile time.
constexpr SnapshotMetric<Reading> kBothReads[] = {
    {.name = "x",
     .help = "x",
     .value = [](const Reading& r) { return r.temp_c; },
     .series = [](const Reading&, MetricSeries&) {}}};
static_assert(!valid_metric_table(kBothReads));
constexpr SnapshotMetric<Reading> kNoRead[] = {{.name = "x", .help = "x"}};
static_assert(!valid_metric_table(kNoRead));
constexpr SnapshotMetric<Reading> kNoHelp[] = {
    {.name = "x", .help = "", .value = [](const Reading& r) { return r.temp_c; }}};
static_assert(!valid_metric_table(kNoHelp));

// "component/name{label=value}" -> value, for every series of `m`.
std::map<std::string, double> series_of(const MetricRegistry& m) {
  std::map<std::string, double> out;
  for (const MetricSample& s : m.snapshot(0)) {
    std::string key = s.component + "/" + s.name;
    for (const auto& [n, v] : s.labels) key += "{" + n + "=" + v + "}";
    out[key] = s.value;
  }
  return out;
}

TEST(SnapshotMetric, DescribesEachRowWithItsHelpAndKind) {
  MetricRegistry m;
  describe_metrics(&m, kTable);
  const Reading r{1.5, 3, {{"a", 1}}};
  publish_metrics(&m, "test", kTable, &r);
  const std::string text = m.prometheus_text();
  EXPECT_NE(text.find("# HELP test_temp_celsius A temperature that may not be read\n"
                      "# TYPE test_temp_celsius gauge\n"
                      "test_temp_celsius{gpud_component=\"test\"} 1.5\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("# TYPE test_events_total counter\n"
                      "test_events_total{gpud_component=\"test\"} 3\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("test_zone_value{gpud_component=\"test\",zone=\"a\"} 1\n"), std::string::npos)
      << text;
}

TEST(SnapshotMetric, AValueNotReadThisTimeLosesItsSeries) {
  MetricRegistry m;
  describe_metrics(&m, kTable);
  Reading r{40.0, 1, {{"a", 1}, {"b", 2}}};
  publish_metrics(&m, "test", kTable, &r);
  ASSERT_EQ(series_of(m).at("test/test_temp_celsius"), 40.0);
  ASSERT_TRUE(series_of(m).contains("test/test_zone_value{zone=b}"));

  r.temp_c.reset();
  r.by_zone.erase("b");
  publish_metrics(&m, "test", kTable, &r);
  auto s = series_of(m);
  EXPECT_FALSE(s.contains("test/test_temp_celsius"));
  EXPECT_FALSE(s.contains("test/test_zone_value{zone=b}"));
  EXPECT_EQ(s.at("test/test_zone_value{zone=a}"), 1.0);
  EXPECT_EQ(s.at("test/test_events_total"), 1.0);
}

TEST(SnapshotMetric, AFailedReadLeavesNoSeriesOfTheTable) {
  MetricRegistry m;
  describe_metrics(&m, kTable);
  const Reading r{40.0, 1, {{"a", 1}}};
  publish_metrics(&m, "test", kTable, &r);
  m.set("other", "test_temp_celsius", 7);  // another component's series of the same family
  m.set("test", "test_not_in_the_table", 9);
  ASSERT_EQ(series_of(m).size(), 5u);

  publish_metrics(&m, "test", kTable, Result<Reading>(make_error("read failed")));
  auto s = series_of(m);
  EXPECT_EQ(s.size(), 2u);
  EXPECT_EQ(s.at("other/test_temp_celsius"), 7.0);
  EXPECT_EQ(s.at("test/test_not_in_the_table"), 9.0);

  publish_metrics(&m, "test", kTable, Result<Reading>(r));
  ASSERT_EQ(series_of(m).size(), 5u);
  publish_metrics(&m, "test", kTable, nullptr);
  EXPECT_EQ(series_of(m).size(), 2u);
}

TEST(SnapshotMetric, WithoutARegistryNothingHappens) {
  describe_metrics(nullptr, kTable);
  const Reading r;
  publish_metrics(nullptr, "test", kTable, &r);
}

TEST(SnapshotMetric, MetricValueKeepsAbsentAbsent) {
  EXPECT_EQ(metric_value(std::optional<uint64_t>()), std::nullopt);
  EXPECT_EQ(metric_value(std::optional<int64_t>(-3)), -3.0);
  EXPECT_EQ(metric_value(uint64_t{1} << 40), 1099511627776.0);
}

}  // namespace
}  // namespace gpud::components
