// The renderer of NVIDIA verdicts: what a verdict becomes in the reason, the suggested action, the
// error, extra_info.data and the detail table.
#include "components/nvidia/verdict.h"

#include <gtest/gtest.h>

#include "components/nvidia/test_snapshot.h"

namespace gpud::components {
namespace {

using namespace testing;

TEST(Verdict, NoFindingRendersTheHealthyReasonDataAndTable) {
  auto s = h100x(2);
  NvidiaVerdict v;
  v.healthy_reason = "all fine";
  v.columns = {"CORE °C", "SM MHz"};
  v.data["product"] = "H100";
  s.gpus[1].clock_sm_mhz = not_supported<uint32_t>();
  for (const auto& g : s.gpus)
    v.gpus.emplace_back(g).field("core", g.temperature_c).field("sm_mhz", g.clock_sm_mhz);
  auto r = render_verdict("c", v);
  ASSERT_EQ(r.states.size(), 1U);
  EXPECT_EQ(r.health(), Health::kHealthy);
  EXPECT_EQ(r.states[0].reason, "all fine");
  EXPECT_EQ(r.states[0].error, "");
  EXPECT_FALSE(r.states[0].suggested_actions);
  EXPECT_EQ(r.states[0].data.dump(),
            R"({"gpus":[{"bus_id":"0000:10:00.0","core":34,"index":0,"sm_mhz":345,)"
            R"("uuid":"GPU-00000000"},{"bus_id":"0000:11:00.0","core":34,"index":1,"sm_mhz":null,)"
            R"("uuid":"GPU-00000001"}],"product":"H100"})");
  EXPECT_EQ(r.detail,
            "GPU  CORE °C  SM MHz\n"
            "0    34        345\n"
            "1    34        n/a\n");
}

TEST(Verdict, FindingsJoinTheStrongestActionWinsAndNvmlErrorsAreTheError) {
  auto s = h100x(2);
  NvidiaVerdict v;
  v.healthy_reason = "unused";
  v.action_description = "do something";
  v.add(s.gpus[0], Health::kDegraded, "first", RepairAction::kRebootSystem);
  v.nvml_error(s.gpus[1], "SM clock", "Unknown Error");
  v.add(Health::kUnhealthy, "third", RepairAction::kHardwareInspection);
  EXPECT_EQ(v.findings_for(1).size(), 1U);
  auto r = render_verdict("c", v);
  EXPECT_EQ(r.health(), Health::kUnhealthy);
  EXPECT_EQ(r.states[0].reason, "first; GPU 1 (0000:11:00.0): SM clock: Unknown Error; third");
  EXPECT_EQ(r.states[0].error, "GPU 1 (0000:11:00.0): SM clock: Unknown Error");
  ASSERT_TRUE(r.states[0].suggested_actions);
  EXPECT_EQ(r.states[0].suggested_actions->description, "do something");
  EXPECT_EQ(r.states[0].suggested_actions->repair_actions,
            std::vector<RepairAction>{RepairAction::kHardwareInspection});
}

TEST(Verdict, WithoutColumnsTheDetailIsThePrefaceAndDataHasNoGpus) {
  NvidiaVerdict v;
  v.healthy_reason = "not supported";
  v.data = {{"supported", false}};
  v.detail_preface = "feature: not supported\n";
  auto r = render_verdict("c", v);
  EXPECT_EQ(r.states[0].data.dump(), R"({"supported":false})");
  EXPECT_EQ(r.detail, "feature: not supported\n");
}

TEST(Verdict, PrefixSuffixPostscriptAndRowsShownOneWay) {
  auto s = h100x(2);
  NvidiaVerdict v;
  v.reason_prefix = "found: ";
  v.reason_suffix = " (twice)";
  v.add(s.gpus[1], Health::kDegraded, "b");
  v.add(Health::kHealthy, "a note");
  v.columns = {"X"};
  v.detail_postscript = "end\n";
  GpuRow& data_only = v.gpus.emplace_back(s.gpus[0]);
  data_only.in_table = false;
  GpuRow& table_only = v.gpus.emplace_back(1, nlohmann::json{});
  table_only.cells = {"x"};
  table_only.in_data = false;
  auto r = render_verdict("c", v);
  EXPECT_EQ(r.health(), Health::kDegraded);
  EXPECT_EQ(r.states[0].reason, "found: b; a note (twice)");
  EXPECT_EQ(r.states[0].data.dump(),
            R"({"gpus":[{"bus_id":"0000:10:00.0","index":0,"uuid":"GPU-00000000"}]})");
  EXPECT_EQ(r.detail, "GPU  X\n1    x\nend\n");
}

TEST(Verdict, ATableWithoutRowsCanSaySo) {
  NvidiaVerdict v;
  v.columns = {"PID"};
  EXPECT_EQ(render_verdict("c", v).detail, "GPU  PID\n");
  v.empty_table = "nothing running\n";
  auto r = render_verdict("c", v);
  EXPECT_EQ(r.detail, "nothing running\n");
  EXPECT_EQ(r.states[0].data.dump(), R"({"gpus":[]})");
}

}  // namespace
}  // namespace gpud::components
