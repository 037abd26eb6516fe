#include "app/report.h"

#include <gtest/gtest.h>

#include "app/options.h"
#include "core/time_util.h"

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

// A line that gave only its offset since boot reads "boot + N s" in the text and has no "time" in
// the JSON: the scan's own clock is never shown as the fault's time.
TEST(ScanReport, EventsWithoutAWallClockTimeShowTheirBootOffsetNeverTheScansClock) {
  auto entries = sample_entries();
  Event e = entries[1].events.front();
  e.time = from_unix_seconds(1'790'000'000);
  e.extra_info = {{"boot_offset_seconds", 1005.03}, {"time_known", false}};
  Event no_time = e;
  no_time.extra_info = {{"time_known", false}};
  Event known = e;
  known.extra_info = {{"boot_offset_seconds", 12.5}};
  entries[1].events = {e, no_time, known};
  std::string text = scan_text({}, entries);
  EXPECT_NE(text.find("event boot + 1005.03 s Warning filesystem_read_only"), std::string::npos)
      << text;
  EXPECT_NE(text.find("event time unknown Warning"), std::string::npos) << text;
  EXPECT_NE(text.find("event " + format_rfc3339(known.time)), std::string::npos) << text;
  EXPECT_EQ(text.find(format_rfc3339(e.time)), text.find("event " + format_rfc3339(known.time)) + 6)
      << "the stored time shows only for the event whose line gave it";
  auto j = scan_json({}, entries);
  const auto& events = j["components"][1]["events"];
  EXPECT_FALSE(events[0].contains("time"));
  EXPECT_EQ(events[0]["extra_info"]["boot_offset_seconds"], 1005.03);
  EXPECT_FALSE(events[1].contains("time"));
  EXPECT_TRUE(events[2].contains("time"));
}

// Per GPU, each Xid/SXid code with how many times, first and last seen, in text and JSON alike.
TEST(ScanReport, SummarisesEveryXidCodePerGpu) {
  kmsg::Occurrences lost{"accelerator-nvidia-error-xid",
                         "Xid",
                         79,
                         "0000:db:00.0",
                         "GPU-db",
                         14,
                         std::nullopt,
                         std::nullopt,
                         1'005'030'000,
                         3'605'000'000};
  kmsg::Occurrences once{"accelerator-nvidia-error-sxid",
                         "SXid",
                         12028,
                         "0000:db:00.0",
                         "",
                         1,
                         from_unix_seconds(1'790'000'000),
                         from_unix_seconds(1'790'000'000),
                         std::nullopt,
                         std::nullopt};
  std::string text = scan_text({}, sample_entries(), {lost, once});
  auto at = text.find("Kernel-log Xid/SXid per GPU");
  ASSERT_NE(at, std::string::npos) << text;
  EXPECT_NE(text.find("  0000:db:00.0 (GPU-db)\n", at), std::string::npos) << text;
  EXPECT_NE(text.find("Xid 79      14 times  first boot + 1005.03 s, last boot + 3605.00 s", at),
            std::string::npos)
      << text;
  EXPECT_NE(
      text.find("SXid 12028  1 time   first " + format_rfc3339(from_unix_seconds(1'790'000'000))),
      std::string::npos)
      << text;
  auto j = scan_json({}, sample_entries(), {lost, once});
  ASSERT_EQ(j["kernel_log_summary"].size(), 2u);
  EXPECT_EQ(j["kernel_log_summary"][0]["count"], 14);
  EXPECT_EQ(j["kernel_log_summary"][0]["code"], 79);
  EXPECT_EQ(j["kernel_log_summary"][0]["first_boot_offset_seconds"], 1005.03);
  EXPECT_EQ(j["kernel_log_summary"][0]["gpu_uuid"], "GPU-db");
  EXPECT_FALSE(j["kernel_log_summary"][0].contains("first_time"));
  EXPECT_EQ(j["kernel_log_summary"][1]["last_time"],
            format_rfc3339(from_unix_seconds(1'790'000'000)));
  EXPECT_TRUE(scan_json({}, sample_entries())["kernel_log_summary"].empty());
}

// A component that could not check (NVML hung, a GPU lost) is Healthy only in that it found
// nothing: its line gets the not-checked mark, never the healthy one (issue #31).
TEST(ScanReport, AComponentThatCouldNotCheckIsMarkedNotChecked) {
  auto entries = sample_entries();
  ScanEntry blocked{"accelerator-nvidia-ecc",
                    single_state("accelerator-nvidia-ecc", Health::kHealthy,
                                 "not checked: NVML call timed out (see accelerator-nvidia-info)"),
                    {}};
  blocked.result.states[0].findings.push_back(
      Finding::blocked(Subject::every_gpu(), Health::kHealthy, "all GPUs: NVML call timed out",
                       "accelerator-nvidia-info"));
  entries.push_back(blocked);
  std::string text = scan_text({}, entries);
  EXPECT_NE(text.find("⊘ accelerator-nvidia-ecc "), std::string::npos) << text;
  EXPECT_EQ(text.find("✔ accelerator-nvidia-ecc"), std::string::npos) << text;
  EXPECT_NE(text.find("✔ cpu "), std::string::npos) << text;
  EXPECT_NE(text.find("3 components, 1 degraded, 0 unhealthy, 1 not (fully) checked (⊘)"),
            std::string::npos)
      << text;
  EXPECT_EQ(scan_text({}, sample_entries()).find("not (fully) checked"), std::string::npos);

  nlohmann::json states = nlohmann::json::parse(R"([
    {"component":"cpu","states":[{"health":"Healthy","reason":"ok"}]},
    {"component":"accelerator-nvidia-ecc","states":[{"health":"Healthy","reason":"not checked",
      "extra_info":{"not_checked":"[\"all GPUs: hung\"]"}}]}
  ])");
  std::string status = states_text(states);
  EXPECT_NE(status.find("⊘ accelerator-nvidia-ecc"), std::string::npos) << status;
  EXPECT_NE(status.find("✔ cpu"), std::string::npos) << status;
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
