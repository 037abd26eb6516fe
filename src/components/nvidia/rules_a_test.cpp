// Rule tests of the NVIDIA (A) components over hand-built snapshots (no NVML, no I/O).
#include <gtest/gtest.h>

#include "components/nvidia/clock_speed.h"
#include "components/nvidia/ecc.h"
#include "components/nvidia/gpu_counts.h"
#include "components/nvidia/hw_slowdown.h"
#include "components/nvidia/info.h"
#include "components/nvidia/memory.h"
#include "components/nvidia/power.h"
#include "components/nvidia/remapped_rows.h"
#include "components/nvidia/retired_pages.h"
#include "components/nvidia/temperature.h"
#include "components/nvidia/test_snapshot.h"
#include "components/nvidia/utilization.h"

namespace gpud::components {
namespace {

using namespace testing;
using namespace std::chrono_literals;

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}
std::optional<RepairAction> action_of(const CheckResult& r) {
  const auto& a = r.states.at(0).suggested_actions;
  if (!a || a->repair_actions.empty()) return std::nullopt;
  return a->repair_actions.front();
}
nlohmann::json data_of(const CheckResult& r) {
  return nlohmann::json::parse(r.states.at(0).extra_info.at("data"));
}

// ---- info ----
TEST(NvidiaInfo, ReportsProductDriverAndEveryGpu) {
  auto r = evaluate_info(h100x(8));
  EXPECT_EQ(r.health(), Health::kHealthy);
  auto d = data_of(r);
  EXPECT_EQ(d["product"], "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(d["brand"], "Tesla");
  EXPECT_EQ(d["architecture"], "hopper");
  EXPECT_EQ(d["driver_version"], "550.54.15");
  EXPECT_EQ(d["cuda_version"], "12.4");
  EXPECT_EQ(d["gpu_count"], 8);
  EXPECT_EQ(d["gpus"][3]["uuid"], "GPU-00000003");
  EXPECT_EQ(d["gpus"][3]["minor_number"], 3);
  EXPECT_TRUE(contains(r.detail, "GPU-00000007"));
}

TEST(NvidiaInfo, ErroredFieldStaysHealthy) {
  auto s = h100x(1);
  s.gpus[0].serial = errored<std::string>();
  EXPECT_EQ(evaluate_info(s).health(), Health::kHealthy);
}

// ---- gpu counts ----
TEST(GpuCounts, NotCheckedWithoutExpectedCount) {
  GpuCountInput in;
  in.nvml_count = 7;
  auto r = evaluate_gpu_counts(in);
  EXPECT_EQ(r.health(), Health::kHealthy);
  EXPECT_TRUE(contains(r.summary(), "not set"));
}

TEST(GpuCounts, MatchingCountIsHealthy) {
  GpuCountInput in{8, 8, 8, {}, {}};
  EXPECT_EQ(evaluate_gpu_counts(in).health(), Health::kHealthy);
}

TEST(GpuCounts, MissingGpuNeedsRebootFirst) {
  GpuCountInput in{7, 8, 8, {}, {Clock::now()}};
  auto r = evaluate_gpu_counts(in);
  EXPECT_EQ(r.health(), Health::kUnhealthy);
  EXPECT_TRUE(contains(r.summary(), "found 7, expected 8")) << r.summary();
  EXPECT_EQ(action_of(r), RepairAction::kRebootSystem);
}

TEST(GpuCounts, MismatchAfterTwoRebootsNeedsInspection) {
  TimePoint t0 = Clock::now() - 10h;
  GpuCountInput in{7, 8, 8, {t0, t0 + 2h}, {t0 - 1h, t0 + 1h, t0 + 3h}};
  EXPECT_EQ(action_of(evaluate_gpu_counts(in)), RepairAction::kHardwareInspection);
}

// ---- temperature ----
TEST(Temperature, NormalTemperaturesAreHealthy) {
  auto r = evaluate_temperature(h100x(8), 5);
  EXPECT_EQ(r.health(), Health::kHealthy);
  EXPECT_EQ(data_of(r)["gpus"][0]["used_percent_slowdown"], "38.20");
}

TEST(Temperature, SmallMarginIsDegraded) {
  auto s = h100x(2);
  s.gpus[1].margin_temperature_c = ok(4);
  EXPECT_EQ(evaluate_temperature(s, 0).health(), Health::kHealthy);  // margin rule off
  auto r = evaluate_temperature(s, 5);
  EXPECT_EQ(r.health(), Health::kDegraded);
  EXPECT_TRUE(contains(r.summary(), "GPU 1")) << r.summary();
  EXPECT_TRUE(contains(r.summary(), "only 4 °C margin")) << r.summary();
}

TEST(Temperature, CoreAboveGpuMaxIsDegraded) {
  auto s = h100x(1);
  s.gpus[0].temperature_c = ok(88);
  auto r = evaluate_temperature(s, 0);
  EXPECT_EQ(r.health(), Health::kDegraded);
  EXPECT_TRUE(contains(r.summary(), "GPU temperature anomalies"));
}

TEST(Temperature, HbmAboveMemMaxIsDegraded) {
  auto s = h100x(8);
  s.gpus[4].temperature_hbm_c = ok(99);
  auto r = evaluate_temperature(s, 0);
  EXPECT_EQ(r.health(), Health::kDegraded);
  EXPECT_TRUE(contains(r.summary(), "HBM temperature anomalies: GPU 4")) << r.summary();
}

TEST(Temperature, UnsupportedHbmAndMarginAreNotApplicable) {
  auto s = h100x(1);
  s.gpus[0].temperature_hbm_c = not_supported<int>();
  s.gpus[0].margin_temperature_c = not_supported<int>();
  s.gpus[0].threshold_mem_max_c = not_supported<uint32_t>();
  auto r = evaluate_temperature(s, 5);
  EXPECT_EQ(r.health(), Health::kHealthy);
  EXPECT_EQ(data_of(r)["gpus"][0]["hbm_temperature_supported"], false);
}

TEST(Temperature, NvmlErrorIsUnhealthyWithText) {
  auto s = h100x(1);
  s.gpus[0].temperature_c = errored<int>("Unknown Error");
  auto r = evaluate_temperature(s, 0);
  EXPECT_EQ(r.health(), Health::kUnhealthy);
  EXPECT_TRUE(contains(r.states[0].error, "Unknown Error"));
}

// ---- power / clocks / memory / utilization ----
TEST(Power, ReportsUsedPercentOfEnforcedLimit) {
  auto r = evaluate_power(h100x(1));
  EXPECT_EQ(r.health(), Health::kHealthy);
  EXPECT_EQ(data_of(r)["gpus"][0]["used_percent"], "10.14");
}

TEST(Power, FallsBackToManagementLimit) {
  auto s = h100x(1);
  s.gpus[0].power_enforced_limit_mw = not_supported<uint32_t>();
  s.gpus[0].power_management_limit_mw = ok<uint32_t>(142000);
  EXPECT_EQ(data_of(evaluate_power(s))["gpus"][0]["used_percent"], "50.00");
}

TEST(Power, NvmlErrorIsUnhealthy) {
  auto s = h100x(2);
  s.gpus[1].power_usage_mw = errored<uint32_t>("Timeout");
  auto r = evaluate_power(s);
  EXPECT_EQ(r.health(), Health::kUnhealthy);
  EXPECT_TRUE(contains(r.summary(), "GPU 1")) << r.summary();
}

TEST(ClockSpeed, ReportsClocks) {
  auto r = evaluate_clock_speed(h100x(1));
  EXPECT_EQ(r.health(), Health::kHealthy);
  EXPECT_EQ(data_of(r)["gpus"][0]["memory_mhz"], 2619);
  EXPECT_EQ(data_of(r)["gpus"][0]["sm_mhz"], 345);
}

TEST(GpuMemory, ReportsBytesAndPercent) {
  auto s = h100x(1);
  s.gpus[0].memory.value.used_bytes = s.gpus[0].memory.value.total_bytes / 4;
  auto r = evaluate_gpu_memory(s);
  EXPECT_EQ(r.health(), Health::kHealthy);
  EXPECT_EQ(data_of(r)["gpus"][0]["used_percent"], "25.00");
}

TEST(GpuMemory, UnsupportedIsNotAnError) {
  auto s = h100x(1);
  s.gpus[0].memory = not_supported<nvml::Memory>();
  EXPECT_EQ(evaluate_gpu_memory(s).health(), Health::kHealthy);
}

TEST(Utilization, ReportsPercents) {
  auto s = h100x(1);
  s.gpus[0].utilization = ok(nvml::Utilization{97, 40});
  auto r = evaluate_utilization(s);
  EXPECT_EQ(r.health(), Health::kHealthy);
  EXPECT_EQ(data_of(r)["gpus"][0]["gpu_used_percent"], 97);
}

// ---- hw slowdown ----
TEST(HwSlowdown, RecordsOneEventPerGpuWithHwReason) {
  auto s = h100x(8);
  s.gpus[1].clocks_event_reasons = ok<uint64_t>(0x8);
  s.gpus[6].clocks_event_reasons = ok<uint64_t>(0xC0);
  s.gpus[2].clocks_event_reasons = ok<uint64_t>(0x4);  // SW power cap: not HW
  TimePoint now = Clock::now();
  auto ev = hw_slowdown_events(s, now);
  ASSERT_EQ(ev.size(), 2U);
  EXPECT_EQ(ev[0].name, "hw_slowdown");
  EXPECT_EQ(ev[0].message, "GPU-00000001: HW Slowdown");
  EXPECT_EQ(ev[1].message, "GPU-00000006: HW Thermal Slowdown, HW Power Brake Slowdown");
  EXPECT_EQ(ev[0].time, std::chrono::time_point_cast<std::chrono::minutes>(now));
  auto r = evaluate_hw_slowdown(s, ev, now);
  EXPECT_EQ(r.health(), Health::kHealthy);  // one minute in ten
  EXPECT_TRUE(contains(r.summary(), "GPU 6")) << r.summary();
}

std::vector<Event> slowdown_minutes(TimePoint now, int minutes) {
  std::vector<Event> out;
  for (int i = 0; i < minutes; ++i) {
    Event e;
    e.name = "hw_slowdown";
    e.time = now - std::chrono::minutes(i);
    out.push_back(e);
    out.push_back(e);  // two GPUs in the same minute count once
  }
  return out;
}

TEST(HwSlowdown, SixOfTenMinutesNeedsInspection) {
  TimePoint now = Clock::now();
  auto s = h100x(2);
  s.gpus[0].clocks_event_reasons = ok<uint64_t>(0x8);
  auto r = evaluate_hw_slowdown(s, slowdown_minutes(now, 6), now);
  EXPECT_EQ(r.health(), Health::kUnhealthy);
  EXPECT_EQ(action_of(r), RepairAction::kHardwareInspection);
  EXPECT_TRUE(contains(r.summary(), "0.60")) << r.summary();
}

TEST(HwSlowdown, FiveOfTenMinutesIsHealthy) {
  TimePoint now = Clock::now();
  EXPECT_EQ(evaluate_hw_slowdown(h100x(1), slowdown_minutes(now, 5), now).health(),
            Health::kHealthy);
}

TEST(HwSlowdown, EventsOutsideTheWindowDoNotCount) {
  TimePoint now = Clock::now();
  auto ev = slowdown_minutes(now - 30min, 10);
  EXPECT_EQ(evaluate_hw_slowdown(h100x(1), ev, now).health(), Health::kHealthy);
}

TEST(HwSlowdown, UnsupportedReasonsAreNotApplicable) {
  auto s = h100x(1);
  s.gpus[0].clocks_event_reasons = not_supported<uint64_t>();
  EXPECT_TRUE(hw_slowdown_events(s, Clock::now()).empty());
  EXPECT_EQ(evaluate_hw_slowdown(s, {}, Clock::now()).health(), Health::kHealthy);
}

// ---- ecc ----
TEST(Ecc, NoErrorsIsHealthy) {
  auto r = evaluate_ecc(h100x(8));
  EXPECT_EQ(r.health(), Health::kHealthy);
  EXPECT_EQ(data_of(r)["gpus"][0]["ecc_mode"]["enabled_current"], true);
}

TEST(Ecc, VolatileUncorrectableNeedsReboot) {
  auto s = h100x(8);
  s.gpus[2].ecc_total.value.volatile_uncorrected = 1;
  s.gpus[2].ecc_by_location[nvml::NVML_MEMORY_LOCATION_DRAM].value.volatile_uncorrected = 1;
  auto r = evaluate_ecc(s);
  EXPECT_EQ(r.health(), Health::kUnhealthy);
  EXPECT_EQ(action_of(r), RepairAction::kRebootSystem);
  EXPECT_TRUE(contains(r.summary(), "GPU 2")) << r.summary();
  EXPECT_TRUE(contains(r.summary(), "dram")) << r.summary();
}

TEST(Ecc, AggregateOnlyErrorsAreReportedNotJudged) {
  auto s = h100x(1);
  s.gpus[0].ecc_total.value.aggregate_uncorrected = 12;
  s.gpus[0].ecc_total.value.volatile_corrected = 100;
  auto r = evaluate_ecc(s);
  EXPECT_EQ(r.health(), Health::kHealthy);
  EXPECT_EQ(data_of(r)["gpus"][0]["total"]["aggregate"]["uncorrected"], 12);
}

TEST(Ecc, UnsupportedIsNotApplicable) {
  auto s = h100x(1);
  s.gpus[0].ecc_mode = not_supported<nvml::EccMode>();
  s.gpus[0].ecc_total = not_supported<nvml::EccCounts>();
  for (auto& l : s.gpus[0].ecc_by_location) l = not_supported<nvml::EccCounts>();
  auto r = evaluate_ecc(s);
  EXPECT_EQ(r.health(), Health::kHealthy);
  EXPECT_TRUE(contains(r.summary(), "not supported")) << r.summary();
}

// ---- remapped rows ----

TEST(RemappedRows, NoRemapIsHealthy) {
  EXPECT_EQ(evaluate_remapped_rows(h100x(8)).health(), Health::kHealthy);
}

TEST(RemappedRows, PendingRemapNeedsReboot) {
  auto s = h100x(8);
  s.gpus[2].remapped_rows = ok(nvml::RemappedRows{0, 1, true, false});
  auto r = evaluate_remapped_rows(s);
  EXPECT_EQ(r.health(), Health::kUnhealthy);
  EXPECT_EQ(action_of(r), RepairAction::kRebootSystem);
  EXPECT_TRUE(contains(r.summary(), "GPU 2")) << r.summary();
  EXPECT_TRUE(contains(r.summary(), "pending row remapping")) << r.summary();
}

TEST(RemappedRows, FailedRemapNeedsInspectionOverReboot) {
  auto s = h100x(8);
  s.gpus[2].remapped_rows = ok(nvml::RemappedRows{0, 1, true, false});
  s.gpus[5].remapped_rows = ok(nvml::RemappedRows{2, 8, false, true});
  auto r = evaluate_remapped_rows(s);
  EXPECT_EQ(r.health(), Health::kUnhealthy);
  EXPECT_EQ(action_of(r), RepairAction::kHardwareInspection);
  EXPECT_TRUE(contains(r.summary(), "GPU 5")) << r.summary();
  EXPECT_TRUE(contains(r.summary(), "RMA")) << r.summary();
}

TEST(RemappedRows, ProductWithoutRemappingIsNotApplicable) {
  auto s = h100x(1);
  s.gpus[0].name = ok<std::string>("NVIDIA GeForce RTX 4090");
  s.gpus[0].remapped_rows = not_supported<nvml::RemappedRows>();
  auto r = evaluate_remapped_rows(s);
  EXPECT_EQ(r.health(), Health::kHealthy);
  EXPECT_TRUE(contains(r.summary(), "does not support row remapping"));
}

TEST(RemappedRows, NvmlErrorIsUnhealthyButOtherGpusAreChecked) {
  auto s = h100x(3);
  s.gpus[0].remapped_rows = errored<nvml::RemappedRows>("Unknown Error");
  s.gpus[2].remapped_rows = ok(nvml::RemappedRows{0, 0, true, false});
  auto r = evaluate_remapped_rows(s);
  EXPECT_EQ(r.health(), Health::kUnhealthy);
  EXPECT_TRUE(contains(r.summary(), "GPU 0")) << r.summary();
  EXPECT_TRUE(contains(r.summary(), "GPU 2")) << r.summary();
}

// ---- retired pages ----
TEST(RetiredPages, OnlyPreAmpereRetiresPages) {
  EXPECT_TRUE(snapshot_retires_pages(snapshot_of({v100(0)})));
  EXPECT_FALSE(snapshot_retires_pages(h100x(8)));
  auto s = snapshot_of({v100(0)});
  s.gpus[0].retired_pages = not_supported<nvml::RetiredPages>();
  EXPECT_FALSE(snapshot_retires_pages(s));
}

TEST(RetiredPages, NoRetiredPagesIsHealthy) {
  EXPECT_EQ(evaluate_retired_pages(snapshot_of({v100(0), v100(1)}), {}).health(), Health::kHealthy);
}

TEST(RetiredPages, PendingRetirementNeedsReboot) {
  auto s = snapshot_of({v100(0), v100(1)});
  s.gpus[1].retired_pages_pending = ok(true);
  auto r = evaluate_retired_pages(s, {});
  EXPECT_EQ(r.health(), Health::kUnhealthy);
  EXPECT_EQ(action_of(r), RepairAction::kRebootSystem);
  EXPECT_TRUE(contains(r.summary(), "GPU 1")) << r.summary();
}

TEST(RetiredPages, SixtyThreePagesNeedInspection) {
  auto s = snapshot_of({v100(0)});
  s.gpus[0].retired_pages = ok(nvml::RetiredPages{50, 12});
  EXPECT_EQ(evaluate_retired_pages(s, {}).health(), Health::kHealthy);
  s.gpus[0].retired_pages = ok(nvml::RetiredPages{50, 13});
  auto r = evaluate_retired_pages(s, {});
  EXPECT_EQ(r.health(), Health::kUnhealthy);
  EXPECT_EQ(action_of(r), RepairAction::kHardwareInspection);
}

TEST(RetiredPages, DbeAboveSoftLimitGrowingWithinAWeekNeedsInspection) {
  TimePoint now = Clock::now();
  auto s = snapshot_of({v100(0)});
  s.gpus[0].retired_pages = ok(nvml::RetiredPages{0, 18});
  // First seen at 16 three days ago: 2 new DBE pages in the window.
  auto history = retired_pages_events(snapshot_of({[] {
                                        auto g = v100(0);
                                        g.retired_pages = ok(nvml::RetiredPages{0, 16});
                                        return g;
                                      }()}),
                                      {}, now - 72h);
  ASSERT_EQ(history.size(), 1U);
  auto r = evaluate_retired_pages(s, history, now);
  EXPECT_EQ(r.health(), Health::kUnhealthy) << r.summary();
  EXPECT_EQ(action_of(r), RepairAction::kHardwareInspection);
  // Without history (scan, or a steady count) the same count is only reported.
  EXPECT_EQ(evaluate_retired_pages(s, {}, now).health(), Health::kHealthy);
}

TEST(RetiredPages, EventOnlyWhenDbeCountChanges) {
  TimePoint now = Clock::now();
  auto s = snapshot_of({v100(0)});
  s.gpus[0].retired_pages = ok(nvml::RetiredPages{0, 3});
  auto first = retired_pages_events(s, {}, now - 1h);
  ASSERT_EQ(first.size(), 1U);
  EXPECT_TRUE(retired_pages_events(s, first, now).empty());
  s.gpus[0].retired_pages = ok(nvml::RetiredPages{0, 4});
  EXPECT_EQ(retired_pages_events(s, first, now).size(), 1U);
}

}  // namespace
}  // namespace gpud::components
