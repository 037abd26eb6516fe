// The pci component's ACS check over the fixture trees and an in-memory store: the note in the
// reason, one acs_enabled event a day, nothing in a VM or with SrcValid off.
#include "components/host/pci.h"

#include <gtest/gtest.h>

#include "store/database.h"
#include "store/event_store.h"

namespace gpud::components {
namespace {

const std::string kTrees = std::string(GPUD_SOURCE_DIR) + "/testing/fixtures/pci-acs/";

struct Fixture {
  explicit Fixture(const std::string& tree) {
    config.host_root = kTrees + tree;
    ctx.config = &config;
    ctx.events = &events;
    ctx.metrics = &metrics;
  }
  std::vector<Event> acs_events() {
    std::vector<Event> out;
    auto all = events.query("pci", TimePoint{}, Clock::now() + std::chrono::hours(48));
    EXPECT_TRUE(all) << all.error().message;
    if (!all) return out;
    for (auto& e : *all)
      if (e.name == "acs_enabled") out.push_back(e);
    return out;
  }
  Config config;
  std::unique_ptr<store::Database> db = store::Database::open_in_memory().value();
  store::EventStore events{*db};
  MetricRegistry metrics;
  ComponentContext ctx;
};

TEST(PciComponentAcs, SourceValidationOnBareMetalIsANoteAndOneWarningADay) {
  Fixture f("bare-metal-acs-on");
  PciComponent pci(f.ctx);
  auto r = pci.check();
  ASSERT_EQ(r.states.size(), 1U);
  EXPECT_EQ(r.states[0].health, Health::kHealthy);
  EXPECT_EQ(r.states[0].reason,
            "ok; ACS Source Validation enabled on 0000:00:01.0 (peer-to-peer traffic goes through "
            "the root complex)");
  auto events = f.acs_events();
  ASSERT_EQ(events.size(), 1U);
  EXPECT_EQ(events[0].type, EventType::kWarning);
  EXPECT_EQ(events[0].message,
            "host virt env is \"none\", ACS is enabled on the following PCI devices: 0000:00:01.0 "
            "(needs to be disabled)");
  EXPECT_EQ(events[0].extra_info["devices"], nlohmann::json::array({"0000:00:01.0"}));
  // The next checks within the day record nothing more.
  (void)pci.check();
  (void)pci.check();
  EXPECT_EQ(f.acs_events().size(), 1U);
}

TEST(PciComponentAcs, NothingWithSourceValidationOffOrInAVm) {
  for (const char* tree : {"bare-metal-acs-off", "vm-acs-on"}) {
    Fixture f(tree);
    PciComponent pci(f.ctx);
    auto r = pci.check();
    ASSERT_EQ(r.states.size(), 1U);
    EXPECT_EQ(r.states[0].reason.find("ACS"), std::string::npos)
        << tree << ": " << r.states[0].reason;
    EXPECT_TRUE(f.acs_events().empty()) << tree;
  }
}

}  // namespace
}  // namespace gpud::components
