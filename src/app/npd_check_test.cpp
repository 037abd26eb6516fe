#include "app/npd_check.h"

#include <gtest/gtest.h>

namespace gpud::app {
namespace {

using nlohmann::json;

json state(const std::string& component, const std::string& health, const std::string& reason,
           const std::string& action = "") {
  json s = {{"component", component}, {"health", health}, {"reason", reason}};
  if (!action.empty()) s["suggested_actions"] = {{"description", ""}, {"repair_actions", {action}}};
  return {{"component", component}, {"states", json::array({s})}};
}

NpdSelection select(const std::string& spec) {
  auto s = parse_npd_selection(spec);
  EXPECT_TRUE(s) << spec;
  return s ? *s : NpdSelection{};
}

const json kGpus = json::array({{{"index", 0},
                                 {"pci_bus_id", "0000:18:00.0"},
                                 {"health", "Healthy"},
                                 {"reasons", json::array()}},
                                {{"index", 3},
                                 {"pci_bus_id", "0000:3b:00.0"},
                                 {"health", "Unhealthy"},
                                 {"reasons",
                                  {{{"component", "accelerator-nvidia-error-xid"},
                                    {"health", "Unhealthy"},
                                    {"reason", "x"}}}}}});

TEST(NpdCheck, AllHealthyIsOk) {
  json states = {state("cpu", "Healthy", "ok"),
                 state("accelerator-nvidia-temperature", "Healthy", "ok")};
  NpdAnswer a = npd_answer(states, nullptr, select("all"));
  EXPECT_EQ(a.exit_code, kNpdOk);
  EXPECT_EQ(a.line, "gpud all: 2 component(s) Healthy");
}

TEST(NpdCheck, UnhealthyGpuComponentNamesTheGpuAndTheAction) {
  json states = {state("cpu", "Healthy", "ok"),
                 state("accelerator-nvidia-error-xid", "Unhealthy",
                       "Xid 79 on 0000:3b:00.0: GPU has fallen off the bus", "REBOOT_SYSTEM")};
  NpdAnswer a = npd_answer(states, kGpus, select("gpu"));
  EXPECT_EQ(a.exit_code, kNpdProblem);
  EXPECT_EQ(a.line.rfind("GPU 3 0000:3b:00.0 REBOOT_SYSTEM: Xid 79", 0), 0u) << a.line;
  EXPECT_LE(a.line.size(), kNpdMaxOutputBytes);
}

TEST(NpdCheck, WithoutPerGpuHealthTheComponentIsNamed) {
  json states =
      json::array({state("accelerator-nvidia-error-xid", "Unhealthy", "Xid 79", "REBOOT_SYSTEM")});
  NpdAnswer a = npd_answer(states, nullptr, select("gpu"));
  EXPECT_EQ(a.exit_code, kNpdProblem);
  EXPECT_EQ(a.line, "accelerator-nvidia-error-xid REBOOT_SYSTEM: Xid 79");
}

TEST(NpdCheck, TheSelectionDecidesWhatCounts) {
  json states = {state("accelerator-nvidia-error-xid", "Unhealthy", "Xid 79", "REBOOT_SYSTEM"),
                 state("memory", "Healthy", "ok"), state("containerd", "Healthy", "ok")};
  EXPECT_EQ(npd_answer(states, kGpus, select("kernel")).exit_code, kNpdOk);
  EXPECT_EQ(npd_answer(states, kGpus, select("runtime")).exit_code, kNpdOk);
  EXPECT_EQ(npd_answer(states, kGpus, select("memory,runtime")).exit_code, kNpdOk);
  EXPECT_EQ(npd_answer(states, kGpus, select("memory, accelerator-nvidia-error-xid")).exit_code,
            kNpdProblem);
  EXPECT_EQ(npd_answer(states, kGpus, select("all")).exit_code, kNpdProblem);
}

TEST(NpdCheck, WorstStateWinsAndDegradedAloneIsOkButSaid) {
  json states = {state("disk", "Degraded", "disk 91% full"),
                 state("memory", "Unhealthy", "ECC errors", "HARDWARE_INSPECTION")};
  NpdAnswer a = npd_answer(states, nullptr, select("kernel"));
  EXPECT_EQ(a.exit_code, kNpdProblem);
  EXPECT_EQ(a.line, "memory HARDWARE_INSPECTION: ECC errors");
  NpdAnswer d = npd_answer(json::array({states[0]}), nullptr, select("kernel"));
  EXPECT_EQ(d.exit_code, kNpdOk);
  EXPECT_EQ(d.line, "disk Degraded: disk 91% full");
}

TEST(NpdCheck, InitializingWithoutAProblemIsUnknown) {
  json states = json::array({state("accelerator-nvidia-info", "Initializing", "waiting for NVML")});
  EXPECT_EQ(npd_answer(states, nullptr, select("gpu")).exit_code, kNpdUnknown);
  json unhealthy =
      json::array({states[0], state("accelerator-nvidia-error-xid", "Unhealthy", "Xid 79")});
  NpdAnswer a = npd_answer(unhealthy, nullptr, select("gpu"));
  EXPECT_EQ(a.exit_code, kNpdProblem);
  EXPECT_EQ(a.line, "accelerator-nvidia-error-xid Unhealthy: Xid 79") << "no action suggested";
}

TEST(NpdCheck, NothingSelectedOnThisNodeIsOk) {
  NpdAnswer a =
      npd_answer(json::array({state("cpu", "Healthy", "ok")}), nullptr, select("runtime"));
  EXPECT_EQ(a.exit_code, kNpdOk);
  EXPECT_EQ(a.line, "gpud runtime: no such components on this node");
}

TEST(NpdCheck, LongReasonIsCutTo80BytesOnACharacterBoundary) {
  std::string reason(70, 'x');
  reason += "é€日本語のテキスト";
  json states = json::array({state("memory", "Unhealthy", reason, "HARDWARE_INSPECTION")});
  NpdAnswer a = npd_answer(states, nullptr, select("kernel"));
  EXPECT_LE(a.line.size(), kNpdMaxOutputBytes);
  EXPECT_GE(a.line.size(), kNpdMaxOutputBytes - 3);
  EXPECT_NE(static_cast<unsigned char>(a.line.back()) & 0xC0, 0x80u) << "no split character";
  EXPECT_EQ(npd_line("a\nb"), "a b");
}

TEST(NpdCheck, SelectionRejectsWhatIsNeitherPresetNorName) {
  EXPECT_FALSE(parse_npd_selection(""));
  EXPECT_FALSE(parse_npd_selection(" , "));
  auto bad = parse_npd_selection("gpu,GPU!");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("GPU!"), std::string::npos);
  EXPECT_TRUE(select("gpu").selects("accelerator-nvidia-nvlink"));
  EXPECT_FALSE(select("gpu").selects("cpu"));
  EXPECT_TRUE(select("kernel").selects("os"));
  EXPECT_TRUE(select("runtime").selects("kubelet"));
}

}  // namespace
}  // namespace gpud::app
