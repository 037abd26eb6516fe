#include "core/reboot_rules.h"

#include <gtest/gtest.h>

namespace gpud {
namespace {

using std::chrono::hours;
const TimePoint kT0 = Clock::from_time_t(1'700'000'000);
TimePoint at(int h) { return kT0 + hours(h); }

ErrorRecord err(int h, int code, EventType type,
                std::optional<RepairAction> a = RepairAction::kRebootSystem) {
  return {at(h), false, code, type, a, "XID " + std::to_string(code), ""};
}
ErrorRecord reboot(int h) { return {at(h), true, 0, EventType::kWarning, std::nullopt, "", ""}; }

TEST(SuggestedActions, NoFailureNoAction) {
  EXPECT_FALSE(evaluate_suggested_actions({at(1)}, {}).has_value());
}
TEST(SuggestedActions, FailureWithoutRebootNeedsReboot) {
  EXPECT_EQ(evaluate_suggested_actions({}, {at(1), at(2)}), RepairAction::kRebootSystem);
}
TEST(SuggestedActions, RebootAfterNewestFailureResolves) {
  EXPECT_FALSE(evaluate_suggested_actions({at(3)}, {at(1), at(2)}).has_value());
}
TEST(SuggestedActions, OneRebootOrOneFailureNeedsReboot) {
  EXPECT_EQ(evaluate_suggested_actions({at(1)}, {at(2), at(3)}), RepairAction::kRebootSystem);
  EXPECT_EQ(evaluate_suggested_actions({at(1), at(3)}, {at(4)}), RepairAction::kRebootSystem);
}
TEST(SuggestedActions, FailuresAfterTwoRebootsNeedInspection) {
  EXPECT_EQ(evaluate_suggested_actions({at(1), at(3)}, {at(2), at(4)}),
            RepairAction::kHardwareInspection);
}
TEST(SuggestedActions, FailuresAfterTheSameRebootCountOnce) {
  EXPECT_EQ(evaluate_suggested_actions({at(0), at(1)}, {at(2), at(3)}),
            RepairAction::kRebootSystem);
  EXPECT_EQ(evaluate_suggested_actions({at(0), at(1)}, {at(2), at(3)}, 1),
            RepairAction::kHardwareInspection);
}
// The boundary, decided once: a failure stamped with its reboot's second happened after that
// reboot (it survived it), so the reboot neither resolves it nor escapes the count.
TEST(SuggestedActions, FailureAtTheRebootsInstantFollowsThatReboot) {
  EXPECT_EQ(evaluate_suggested_actions({at(1)}, {at(1)}), RepairAction::kRebootSystem);
  EXPECT_EQ(evaluate_suggested_actions({at(1), at(3)}, {at(1), at(3)}),
            RepairAction::kHardwareInspection);
  EXPECT_EQ(evaluate_suggested_actions({at(1), at(3)}, {at(2), at(3)}),
            RepairAction::kHardwareInspection);
  // One instant later the reboot is after the newest failure: resolved.
  EXPECT_FALSE(evaluate_suggested_actions({at(1), at(4)}, {at(2), at(3)}).has_value());
}
TEST(SuggestedActions, FailuresBeforeAnyRebootAreNotPaired) {
  EXPECT_EQ(evaluate_suggested_actions({at(5), at(6)}, {at(1), at(2), at(7)}),
            RepairAction::kRebootSystem);
}

TEST(SuggestedActions, AggregateHardwareDominates) {
  EXPECT_EQ(aggregate_actions({RepairAction::kRebootSystem, RepairAction::kHardwareInspection}),
            RepairAction::kHardwareInspection);
  EXPECT_EQ(aggregate_actions({RepairAction::kCheckUserAppAndGpu, RepairAction::kRebootSystem}),
            RepairAction::kRebootSystem);
  EXPECT_FALSE(aggregate_actions({}).has_value());
}

TEST(Thresholds, OverridesMergeOverDefaults) {
  RebootThresholds d;
  d.overrides[94] = 1000;
  auto t = parse_reboot_thresholds(R"({"overrides":{"79":{"rebootThreshold":5}}})", d);
  ASSERT_TRUE(t);
  EXPECT_EQ(t->threshold(79), 5);
  EXPECT_EQ(t->threshold(94), 1000);
  EXPECT_EQ(t->threshold(48), 2);
}
TEST(Thresholds, BadDocumentsAreErrors) {
  EXPECT_FALSE(parse_reboot_thresholds("nope", {}));
  EXPECT_FALSE(parse_reboot_thresholds(R"({"overrides":{"x":{"rebootThreshold":1}}})", {}));
  EXPECT_FALSE(parse_reboot_thresholds(R"({"overrides":{"79":{"rebootThreshold":0}}})", {}));
  EXPECT_FALSE(parse_reboot_thresholds(R"({"overrides":{"79":5}})", {}));
  EXPECT_TRUE(parse_reboot_thresholds("", {}));
}

TEST(XidReplay, NoEventsIsHealthy) {
  auto v = replay_errors({}, {});
  EXPECT_EQ(v.health, Health::kHealthy);
  EXPECT_TRUE(v.reason.empty());
}
TEST(XidReplay, FatalIsUnhealthyWithReboot) {
  auto v = replay_errors({err(1, 79, EventType::kFatal)}, {});
  EXPECT_EQ(v.health, Health::kUnhealthy);
  ASSERT_TRUE(v.actions);
  EXPECT_EQ(v.actions->repair_actions, std::vector{RepairAction::kRebootSystem});
  EXPECT_EQ(v.reason, "XID 79");
}
TEST(XidReplay, CriticalIsDegraded) {
  EXPECT_EQ(replay_errors({err(1, 13, EventType::kCritical)}, {}).health, Health::kDegraded);
}
TEST(XidReplay, WarningStaysHealthyButNamed) {
  auto v = replay_errors({err(1, 31, EventType::kWarning, RepairAction::kCheckUserAppAndGpu)}, {});
  EXPECT_EQ(v.health, Health::kHealthy);
  EXPECT_EQ(v.reason, "XID 31");
  EXPECT_FALSE(v.actions);
}
TEST(XidReplay, RebootAfterErrorClearsIt) {
  auto v = replay_errors({err(1, 79, EventType::kFatal), reboot(2)}, {});
  EXPECT_EQ(v.health, Health::kHealthy);
  EXPECT_EQ(v.last_code, 0);
}
TEST(XidReplay, RebootBeforeErrorDoesNotClearIt) {
  EXPECT_EQ(replay_errors({reboot(0), err(1, 79, EventType::kFatal)}, {}).health,
            Health::kUnhealthy);
}
TEST(XidReplay, OrderOfInputDoesNotMatter) {
  EXPECT_EQ(replay_errors({reboot(2), err(1, 79, EventType::kFatal)}, {}).health, Health::kHealthy);
}
TEST(XidReplay, HardwareInspectionSurvivesReboot) {
  auto v = replay_errors(
      {err(1, 81, EventType::kFatal, RepairAction::kHardwareInspection), reboot(2)}, {});
  EXPECT_EQ(v.health, Health::kUnhealthy);
  EXPECT_EQ(v.actions->repair_actions, std::vector{RepairAction::kHardwareInspection});
}
// A verdict that stands only on drills (gpud inject-fault) says so; one real error of its level
// among them makes it real.
TEST(XidReplay, AVerdictOnDrillsAloneIsInjected) {
  auto drill = [](int h, EventType type) {
    ErrorRecord r = err(h, 79, type);
    r.injected = true;
    return r;
  };
  EXPECT_TRUE(replay_errors({drill(1, EventType::kFatal)}, {}).injected);
  EXPECT_FALSE(replay_errors({err(1, 79, EventType::kFatal)}, {}).injected);
  EXPECT_FALSE(
      replay_errors({err(1, 79, EventType::kFatal), drill(2, EventType::kFatal)}, {}).injected);
  EXPECT_FALSE(
      replay_errors({drill(1, EventType::kFatal), err(2, 79, EventType::kFatal)}, {}).injected);
  // A real Warning under an injected Fatal: the Fatal verdict is the drill's.
  EXPECT_TRUE(
      replay_errors({err(1, 13, EventType::kWarning), drill(2, EventType::kFatal)}, {}).injected);
  // A real error cleared by a reboot, then a drill.
  EXPECT_TRUE(
      replay_errors({err(1, 79, EventType::kFatal), reboot(2), drill(3, EventType::kFatal)}, {})
          .injected);
  auto per_device = replay_errors_per_device({drill(1, EventType::kFatal)}, {});
  ASSERT_EQ(per_device.devices.size(), 1u);
  EXPECT_TRUE(per_device.devices[0].injected);
}
TEST(XidReplay, ErrorWithoutActionSurvivesReboot) {
  auto v = replay_errors({err(1, 5, EventType::kFatal, std::nullopt), reboot(2)}, {});
  EXPECT_EQ(v.health, Health::kUnhealthy);
  EXPECT_FALSE(v.actions);
}
TEST(XidReplay, RepeatAfterThresholdRebootsEscalates) {
  std::vector<ErrorRecord> r = {err(1, 79, EventType::kFatal), reboot(2),
                                err(3, 79, EventType::kFatal), reboot(4),
                                err(5, 79, EventType::kFatal)};
  auto v = replay_errors(r, {});
  EXPECT_EQ(v.health, Health::kUnhealthy);
  EXPECT_EQ(v.actions->repair_actions, std::vector{RepairAction::kHardwareInspection});
}
TEST(XidReplay, RepeatAfterOneRebootStillSuggestsReboot) {
  auto v =
      replay_errors({err(1, 79, EventType::kFatal), reboot(2), err(3, 79, EventType::kFatal)}, {});
  EXPECT_EQ(v.actions->repair_actions, std::vector{RepairAction::kRebootSystem});
}
TEST(XidReplay, PerCodeOverrideRaisesThreshold) {
  RebootThresholds t;
  t.overrides[94] = 1000;
  std::vector<ErrorRecord> r = {err(1, 94, EventType::kFatal), reboot(2),
                                err(3, 94, EventType::kFatal), reboot(4),
                                err(5, 94, EventType::kFatal)};
  EXPECT_EQ(replay_errors(r, t).actions->repair_actions, std::vector{RepairAction::kRebootSystem});
  t.default_threshold = 1;
  r[0].code = r[2].code = 48;
  r.resize(3);
  EXPECT_EQ(replay_errors(r, t).actions->repair_actions,
            std::vector{RepairAction::kHardwareInspection});
}
TEST(XidReplay, OtherCodesDoNotEscalate) {
  std::vector<ErrorRecord> r = {err(1, 79, EventType::kFatal), reboot(2),
                                err(3, 48, EventType::kFatal), reboot(4),
                                err(5, 95, EventType::kFatal)};
  EXPECT_EQ(replay_errors(r, {}).actions->repair_actions, std::vector{RepairAction::kRebootSystem});
}
TEST(XidReplay, LessSevereErrorDoesNotReplaceMoreSevere) {
  auto v = replay_errors({err(1, 79, EventType::kFatal), err(2, 13, EventType::kCritical),
                          err(3, 31, EventType::kWarning)},
                         {});
  EXPECT_EQ(v.health, Health::kUnhealthy);
  EXPECT_EQ(v.last_code, 79);
}
ErrorRecord on(std::string device, ErrorRecord r) {
  r.device = std::move(device);
  r.reason += " on " + r.device;
  return r;
}

// The newest error no longer hides an older one on another GPU: each device keeps its own.
TEST(XidReplayPerDevice, EachDeviceKeepsItsErrorAndTheWorstLeads) {
  auto v = replay_errors_per_device({on("0000:3b:00.0", err(1, 79, EventType::kFatal)),
                                     on("0000:1a:00.0", err(2, 13, EventType::kCritical)),
                                     on("0000:86:00.0", err(3, 48, EventType::kFatal))},
                                    {});
  EXPECT_EQ(v.health, Health::kUnhealthy);
  ASSERT_EQ(v.devices.size(), 3u);
  EXPECT_EQ(v.devices[0].device, "0000:3b:00.0");  // fatal ones first, then by bus id
  EXPECT_EQ(v.devices[1].device, "0000:86:00.0");
  EXPECT_EQ(v.devices[2].device, "0000:1a:00.0");
  EXPECT_EQ(v.devices[2].health, Health::kDegraded);
  EXPECT_EQ(v.reason, "XID 79 on 0000:3b:00.0; XID 48 on 0000:86:00.0; XID 13 on 0000:1a:00.0");
  EXPECT_EQ(v.last_code, 79);
  EXPECT_EQ(v.actions->repair_actions, std::vector{RepairAction::kRebootSystem});
}
TEST(XidReplayPerDevice, TheStrongestActionAmongDevicesIsSuggested) {
  auto v = replay_errors_per_device(
      {on("0000:3b:00.0", err(1, 79, EventType::kFatal)),
       on("0000:86:00.0", err(2, 81, EventType::kFatal, RepairAction::kHardwareInspection))},
      {});
  EXPECT_EQ(v.devices[0].device, "0000:86:00.0");
  EXPECT_EQ(v.actions->repair_actions, std::vector{RepairAction::kHardwareInspection});
}
TEST(XidReplayPerDevice, ARebootClearsEachDeviceAndEscalationCountsPerDevice) {
  // 79 on two GPUs around two reboots: neither GPU repeated it after two reboots of its own.
  auto v = replay_errors_per_device({on("0000:3b:00.0", err(1, 79, EventType::kFatal)), reboot(2),
                                     on("0000:86:00.0", err(3, 79, EventType::kFatal)), reboot(4),
                                     on("0000:3b:00.0", err(5, 79, EventType::kFatal))},
                                    {});
  ASSERT_EQ(v.devices.size(), 1u);
  EXPECT_EQ(v.devices[0].device, "0000:3b:00.0");
  EXPECT_EQ(v.actions->repair_actions, std::vector{RepairAction::kHardwareInspection});
  EXPECT_TRUE(
      replay_errors_per_device({on("0000:3b:00.0", err(1, 79, EventType::kFatal)),
                                on("0000:86:00.0", err(2, 48, EventType::kFatal)), reboot(3)},
                               {})
          .devices.empty());
}
TEST(XidReplayPerDevice, NoErrorsIsHealthyWithNoReason) {
  auto v = replay_errors_per_device({reboot(1)}, {});
  EXPECT_EQ(v.health, Health::kHealthy);
  EXPECT_TRUE(v.reason.empty());
  EXPECT_FALSE(v.actions);
}

TEST(XidReplay, MoreSevereErrorReplacesLessSevere) {
  auto v = replay_errors({err(1, 13, EventType::kCritical), err(2, 48, EventType::kFatal)}, {});
  EXPECT_EQ(v.last_code, 48);
}

}  // namespace
}  // namespace gpud
