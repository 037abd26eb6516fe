#include "components/nvidia/xid.h"

#include <gtest/gtest.h>

#include "components/nvidia/nvidia_component.h"
#include "components/nvidia/sxid.h"
#include "components/nvidia/test_snapshot.h"
#include "kmsg/dispatcher.h"
#include "kmsg/writer.h"
#include "store/database.h"
#include "store/event_store.h"

namespace gpud::components {
namespace {

std::unique_ptr<store::Database> memory_db() {
  auto r = store::Database::open_in_memory();
  return std::move(*r);
}

const TimePoint kT0 = Clock::now() - std::chrono::hours(10);
TimePoint at(int h) { return kT0 + std::chrono::hours(h); }

Event xid_event(int h, int code, std::string bus = "0000:3b:00.0", std::string uuid = "") {
  auto ms = kmsg::match_message(kmsg::xid_line(code, bus));
  EXPECT_FALSE(ms.empty());
  return kmsg::to_event(ms.front(), at(h), uuid);
}

TEST(XidRule, FallenOffTheBusIsUnhealthyNamingCodeBusAndUuid) {
  auto v = evaluate_xid({xid_event(1, 79, "0000:3b:00.0", "GPU-1234")}, {}, {}, false);
  EXPECT_EQ(v.health, Health::kUnhealthy);
  EXPECT_NE(v.reason.find("XID 79"), std::string::npos) << v.reason;
  EXPECT_NE(v.reason.find("GPU has fallen off the bus"), std::string::npos) << v.reason;
  EXPECT_NE(v.reason.find("0000:3b:00"), std::string::npos) << v.reason;
  EXPECT_NE(v.reason.find("UUID:GPU-1234"), std::string::npos) << v.reason;
  EXPECT_EQ(v.actions->repair_actions, std::vector{RepairAction::kRebootSystem});
}

TEST(XidRule, RebootClearsAndRepeatsEscalate) {
  EXPECT_EQ(evaluate_xid({xid_event(1, 79)}, {at(2)}, {}, false).health, Health::kHealthy);
  auto v = evaluate_xid({xid_event(1, 79), xid_event(3, 79), xid_event(5, 79)}, {at(2), at(4)}, {},
                        false);
  EXPECT_EQ(v.actions->repair_actions, std::vector{RepairAction::kHardwareInspection});
}

TEST(XidRule, RowRemappingGpusLeave63And64ToRemappedRows) {
  Event e = xid_event(1, 64);
  e.type = EventType::kFatal;  // as the catalog has it (Appendix A)
  EXPECT_EQ(evaluate_xid({e}, {}, {}, true).health, Health::kHealthy);
  EXPECT_EQ(evaluate_xid({e}, {}, {}, false).health, Health::kUnhealthy);
}

// The disagreement this resolved: the Xid component's own table lacked the A10, so on an A10 an
// Xid 64 was judged twice (here and by remapped-rows). Both now read the one catalog.
TEST(XidRule, A10LeavesRowRemappingXidsToRemappedRowsToo) {
  using namespace testing;
  nvml::GpuSnapshot a10 = h100(0);
  a10.name = ok<std::string>("NVIDIA A10");
  const nvml::NvmlSnapshot s = snapshot_of({a10});
  ASSERT_TRUE(caps_of(s).row_remapping);
  Event e = xid_event(1, 64);
  e.type = EventType::kFatal;
  EXPECT_EQ(evaluate_xid({e}, {}, {}, caps_of(s).row_remapping).health, Health::kHealthy);
  nvml::GpuSnapshot v100_0 = v100(0);
  EXPECT_FALSE(caps_of(snapshot_of({v100_0})).row_remapping);
}

TEST(XidRule, Xid94HasAThousandRebootsByDefault) {
  Config c;
  auto t = xid_thresholds(c);
  ASSERT_TRUE(t);
  EXPECT_EQ(t->threshold(94), 1000);
  EXPECT_EQ(t->threshold(79), 2);
  c.xid_reboot_threshold = 3;
  c.xid_thresholds = R"({"overrides":{"79":{"rebootThreshold":7}}})";
  t = xid_thresholds(c);
  EXPECT_EQ(t->threshold(79), 7);
  EXPECT_EQ(t->threshold(48), 3);
  EXPECT_EQ(t->threshold(94), 1000);
}

TEST(SxidRule, FatalSxidIsUnhealthy) {
  auto ms = kmsg::match_message(kmsg::sxid_line(20034, "0000:05:00.0"));
  ASSERT_FALSE(ms.empty());
  auto v = evaluate_sxid({kmsg::to_event(ms.front(), at(1))}, {}, {});
  EXPECT_EQ(v.health, Health::kUnhealthy);
  EXPECT_NE(v.reason.find("20034"), std::string::npos) << v.reason;
  EXPECT_EQ(evaluate_sxid({kmsg::to_event(ms.front(), at(1))}, {at(2)}, {}).health,
            Health::kHealthy);
}

struct Env {
  std::unique_ptr<store::Database> db = memory_db();
  store::EventStore events{*db};
  MetricRegistry metrics;
  Config config;
  ComponentContext ctx() {
    ComponentContext c{&config, &events, &metrics, false};
    return c;
  }
};

TEST(XidComponent, UnsupportedWithoutGpuUntilAnXidArrives) {
  Env env;
  XidComponent xid(env.ctx());
  EXPECT_FALSE(xid.supported());
  kmsg::KernelLogDispatcher d(env.events, env.metrics, {});
  d.feed_message(kmsg::xid_line(79, "0000:3b:00.0"), Clock::now());
  EXPECT_TRUE(xid.supported());
  CheckResult r = xid.check();
  EXPECT_EQ(r.health(), Health::kUnhealthy);
  EXPECT_EQ(r.states.front().name, "error_xid");
  EXPECT_EQ(r.states.front().suggested_actions->repair_actions,
            std::vector{RepairAction::kRebootSystem});
  ASSERT_TRUE(xid.set_healthy());
  EXPECT_EQ(xid.check().health(), Health::kHealthy);
}

TEST(XidComponent, RebootEventOfOsClearsIt) {
  Env env;
  XidComponent xid(env.ctx());
  kmsg::KernelLogDispatcher d(env.events, env.metrics, {});
  d.feed_message(kmsg::xid_line(48, "0000:3b:00.0"), Clock::now() - std::chrono::hours(2));
  EXPECT_EQ(xid.check().health(), Health::kUnhealthy);
  Event reboot{"os",
               Clock::now() - std::chrono::hours(1),
               "reboot",
               EventType::kWarning,
               "system reboot detected",
               nlohmann::json::object()};
  ASSERT_TRUE(env.events.insert(reboot));
  EXPECT_EQ(xid.check().health(), Health::kHealthy);
}

TEST(XidComponent, KernelLogScanMakesItSupported) {
  Env env;
  ComponentContext c = env.ctx();
  c.kernel_log_scan = true;
  EXPECT_TRUE(XidComponent(c).supported());
  EXPECT_TRUE(SxidComponent(c).supported());
}

}  // namespace
}  // namespace gpud::components
