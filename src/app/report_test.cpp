#include "app/report.h"

#include <gtest/gtest.h>

#include "app/options.h"

namespace gpud::app {
namespace {

std::vector<ScanEntry> sample_entries() {
  ScanEntry ok{"cpu", single_state("cpu", Health::kHealthy, "cpu usage 3%"), {}};
  ScanEntry bad{"disk",
                single_state("disk", Health::kDegraded, "/ has 100 MiB free",
                             SuggestedActions{"free space", {RepairAction::kCheckUserAppAndGpu}}),
                {}};
  bad.result.detail = "mount /\nfree 100 MiB";
  Event e;
  e.component = "disk";
  e.name = "filesystem_read_only";
  e.type = EventType::kWarning;
  e.message = "remounted read-only";
  bad.events.push_back(e);
  return {ok, bad};
}

TEST(ScanReport, OneMarkedLinePerComponentThenDetailsOfUnhealthyOnes) {
  nlohmann::json mi = {{"hostname", "node-1"}, {"osImage", "Debian"}, {"kernelVersion", "6.1"}};
  std::string text = scan_text(mi, sample_entries());
  EXPECT_NE(text.find("✔ cpu "), std::string::npos) << text;
  EXPECT_NE(text.find("✘ disk "), std::string::npos) << text;
  auto details = text.find("Details of components that are not healthy");
  ASSERT_NE(details, std::string::npos) << text;
  EXPECT_NE(text.find("✘ disk: Degraded", details), std::string::npos) << text;
  EXPECT_NE(text.find("suggested actions: CHECK_USER_APP_AND_GPU (free space)"), std::string::npos);
  EXPECT_NE(text.find("  free 100 MiB"), std::string::npos) << text;
  EXPECT_NE(text.find("filesystem_read_only"), std::string::npos) << text;
  EXPECT_EQ(text.find("✔ cpu:"), std::string::npos) << "healthy components get no detail block";
  EXPECT_NE(text.find("2 components, 1 degraded, 0 unhealthy"), std::string::npos) << text;
}

TEST(ScanReport, JsonHasMachineInfoAndComponentsWithStatesAndEvents) {
  auto j = scan_json({{"hostname", "node-1"}}, sample_entries());
  EXPECT_EQ(j["machine_info"]["hostname"], "node-1");
  ASSERT_EQ(j["components"].size(), 2u);
  EXPECT_EQ(j["components"][1]["component"], "disk");
  EXPECT_EQ(j["components"][1]["states"][0]["health"], "Degraded");
  EXPECT_EQ(j["components"][1]["events"][0]["name"], "filesystem_read_only");
  EXPECT_TRUE(j["components"][0]["events"].is_array());
}

TEST(StatusReport, WorstStatePerComponent) {
  nlohmann::json states = nlohmann::json::parse(R"([
    {"component":"cpu","states":[{"health":"Healthy","reason":"ok"}]},
    {"component":"os","states":[{"health":"Healthy","reason":"a"},{"health":"Unhealthy","reason":"b"}]}
  ])");
  std::string text = states_text(states);
  EXPECT_NE(text.find("✔ cpu"), std::string::npos) << text;
  EXPECT_NE(text.find("✘ os"), std::string::npos) << text;
  EXPECT_NE(text.find("Unhealthy"), std::string::npos) << text;
  EXPECT_NE(text.find("a; b"), std::string::npos) << text;
}

TEST(Options, SplitListTrimsAndDropsEmpties) {
  EXPECT_EQ(split_list(" cpu, -disk,,memory "),
            (std::vector<std::string>{"cpu", "-disk", "memory"}));
  EXPECT_TRUE(split_list("").empty());
}

TEST(Options, FinalizeRejectsUnknownComponentsAndBadDurations) {
  RunFlags f;
  f.components = "cpu,-nope";
  auto r = finalize(f);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("unknown component \"nope\""), std::string::npos);
  RunFlags g;
  g.metrics_retention = "10s";
  EXPECT_FALSE(finalize(g).ok());
  RunFlags h;
  h.config.host_root = "/nonexistent-root";
  EXPECT_FALSE(finalize(h).ok());
  RunFlags ok;
  ok.components = "all,-cpu";
  ASSERT_TRUE(finalize(ok).ok());
  EXPECT_EQ(ok.config.components, (std::vector<std::string>{"all", "-cpu"}));
  EXPECT_EQ(ok.config.events_retention, std::chrono::hours(336));
}

}  // namespace
}  // namespace gpud::app
