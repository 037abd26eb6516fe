// End-to-end: the pci component's ACS check on the fixture trees (testing/fixtures/pci-acs):
// through `gpud run`, a bridge with Source Validation on bare metal is a note in the reason and one
// acs_enabled Warning event; `gpud scan` names the bridge; in a VM nothing is read.
#include <gtest/gtest.h>

#include <thread>

#include "tests/e2e/daemon_process.h"

namespace gpud::e2e {
namespace {

using namespace std::chrono_literals;

std::string tree(const std::string& name) {
  return std::string(GPUD_SOURCE_DIR) + "/testing/fixtures/pci-acs/" + name;
}

TEST(PciAcsE2E, SourceValidationOnBareMetalIsANoteAndOneEvent) {
  TempDirGuard dir{make_temp_dir()};
  DaemonProcess d(dir.path + "/data",
                  {"--host-root", tree("bare-metal-acs-on"), "--components", "pci"}, false);
  ASSERT_TRUE(d.ready()) << d.log();
  nlohmann::json state, events;
  const auto end = std::chrono::steady_clock::now() + 20s;
  while (std::chrono::steady_clock::now() < end) {
    auto s = d.get("/v1/states?components=pci");
    auto e = d.get("/v1/events?startTime=0&components=pci");
    if (s && s->status == 200 && e && e->status == 200) {
      state = parse_json(s->body)[0]["states"][0];
      events = parse_json(e->body)[0]["events"];
      if (!events.empty()) break;
    }
    std::this_thread::sleep_for(200ms);
  }
  EXPECT_EQ(state.value("health", ""), "Healthy") << state.dump();
  EXPECT_NE(state.value("reason", "").find("ACS Source Validation enabled on 0000:00:01.0"),
            std::string::npos)
      << state.dump();
  ASSERT_EQ(events.size(), 1U) << events.dump();
  EXPECT_EQ(events[0]["name"], "acs_enabled");
  EXPECT_EQ(events[0]["type"], "Warning");
  EXPECT_NE(events[0]
                .value("message", "")
                .find("ACS is enabled on the following PCI devices: "
                      "0000:00:01.0 (needs to be disabled)"),
            std::string::npos)
      << events.dump();
  // Checks after the first record nothing more within the day.
  (void)d.get("/v1/components/trigger-check?componentName=pci");
  auto again = d.get("/v1/events?startTime=0&components=pci");
  ASSERT_TRUE(again);
  EXPECT_EQ(parse_json(again->body)[0]["events"].size(), 1U) << again->body;
}

TEST(PciAcsE2E, ScanNamesTheBridgeOnBareMetalAndNothingInAVm) {
  auto metal = run_gpud({"scan", "--host-root", tree("bare-metal-acs-on"), "--components", "pci"});
  EXPECT_NE(metal.out.find("ACS Source Validation enabled on 0000:00:01.0"), std::string::npos)
      << metal.out;
  auto vm = run_gpud({"scan", "--host-root", tree("vm-acs-on"), "--components", "pci"});
  EXPECT_EQ(vm.out.find("ACS"), std::string::npos) << vm.out;
  EXPECT_EQ(vm.exit_code, 0) << vm.out;
}

}  // namespace
}  // namespace gpud::e2e
