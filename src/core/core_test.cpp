#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/json.h"
#include "core/metrics.h"
#include "core/registry.h"
#include "core/scheduler.h"
#include "core/strings.h"
#include "core/time_util.h"
#include "testing/log_capture.h"

namespace gpud {
namespace {

using namespace std::chrono_literals;

TEST(ComponentSelection, EmptyOrStarEnablesAll) {
  EXPECT_TRUE(component_enabled("cpu", {}));
  EXPECT_TRUE(component_enabled("cpu", {"*"}));
  EXPECT_TRUE(component_enabled("cpu", {"all"}));
}

TEST(ComponentSelection, AllowListEnablesOnlyNamed) {
  EXPECT_TRUE(component_enabled("cpu", {"cpu", "disk"}));
  EXPECT_FALSE(component_enabled("memory", {"cpu", "disk"}));
}

TEST(ComponentSelection, ExclusionsAloneMeanAllButThese) {
  EXPECT_FALSE(component_enabled("cpu", {"-cpu"}));
  EXPECT_TRUE(component_enabled("disk", {"-cpu"}));
  EXPECT_FALSE(component_enabled("cpu", {"all", "-cpu"}));
  EXPECT_FALSE(component_enabled("cpu", {"cpu", "-cpu"}));
}

TEST(Time, FormatsRfc3339Utc) {
  EXPECT_EQ(format_rfc3339(from_unix_seconds(1704164645)), "2024-01-02T03:04:05Z");
}

TEST(Time, ParsesUnixSecondsAndRfc3339) {
  EXPECT_EQ(to_unix_seconds(*parse_time("1704164645")), 1704164645);
  EXPECT_EQ(to_unix_seconds(*parse_time("2024-01-02T03:04:05Z")), 1704164645);
  EXPECT_EQ(to_unix_seconds(*parse_time("2024-01-02T05:04:05+02:00")), 1704164645);
  EXPECT_EQ(to_unix_ms(*parse_time("2024-01-02T03:04:05.250Z")), 1704164645250);
}

TEST(Time, RejectsGarbage) {
  for (const char* s : {"", "abc", "2024-13-02T03:04:05Z", "2024-01-02", "12a",
                        "2024-01-02T03:04:05", "99999999999999999999"})
    EXPECT_FALSE(parse_time(s).has_value()) << s;
}

// Outside 1970..2262 a time cannot be held (or was never meant): refused, never wrapped.
TEST(Time, AcceptsOnlyTheRepresentableRange) {
  EXPECT_EQ(to_unix_seconds(*parse_time("0")), 0);
  EXPECT_EQ(to_unix_seconds(*parse_time("1970-01-01T00:00:00Z")), 0);
  EXPECT_EQ(to_unix_seconds(*parse_time("9223372036")), kMaxUnixSeconds);
  EXPECT_EQ(to_unix_seconds(*parse_time("2262-04-11T23:47:16Z")), kMaxUnixSeconds);
  EXPECT_EQ(format_rfc3339(*parse_time("2262-04-11T23:47:16.854Z")), "2262-04-11T23:47:16Z");
  for (const char* s : {"9000000000000", "9223372037", "-1", "1969-12-31T23:59:59Z",
                        "2262-04-11T23:47:17Z", "2262-04-11T23:47:16.9Z", "2300-01-01T00:00:00Z",
                        "9999-12-31T23:59:59Z", "2262-04-12T00:00:00+00:01"})
    EXPECT_FALSE(parse_time(s).has_value()) << s;
}

TEST(Time, ArithmeticSaturates) {
  const TimePoint now = from_unix_seconds(1'700'000'000);
  EXPECT_EQ(saturating_sub(now, std::chrono::hours(8'760'000)), TimePoint::min());
  EXPECT_EQ(saturating_add(now, std::chrono::hours(8'760'000)), TimePoint::max());
  EXPECT_EQ(saturating_sub(now, std::chrono::seconds(INT64_MAX)), TimePoint::min());
  EXPECT_EQ(saturating_add(now, std::chrono::seconds(INT64_MAX)), TimePoint::max());
  EXPECT_EQ(saturating_add(TimePoint::max(), std::chrono::nanoseconds(1)), TimePoint::max());
  EXPECT_EQ(saturating_sub(now, std::chrono::hours(1)), now - std::chrono::hours(1));
  EXPECT_EQ(saturating_add(now, std::chrono::milliseconds(1)), now + std::chrono::milliseconds(1));
  // 99 years back is still an ordinary time point (1924), before every stored event.
  EXPECT_LT(saturating_sub(now, std::chrono::hours(24 * 365 * 99)), from_unix_seconds(0));
}

TEST(Duration, AtMostOneHundredYears) {
  EXPECT_EQ(parse_duration("876000h"), std::chrono::milliseconds(kMaxDuration));
  EXPECT_EQ(parse_duration("3153600000")->count(), 3'153'600'000'000LL);
  EXPECT_FALSE(parse_duration("876001h").has_value());
  EXPECT_FALSE(parse_duration("8760000h").has_value());
  EXPECT_FALSE(parse_duration("3153600001").has_value());
  EXPECT_FALSE(parse_duration("99999999999999999999").has_value());
  EXPECT_FALSE(parse_duration("1e300h").has_value());
}

TEST(Duration, ParsesGoStyle) {
  EXPECT_EQ(parse_duration("30m")->count(), 30 * 60 * 1000);
  EXPECT_EQ(parse_duration("1h30m")->count(), 90 * 60 * 1000);
  EXPECT_EQ(parse_duration("1.5h")->count(), 90 * 60 * 1000);
  EXPECT_EQ(parse_duration("500ms")->count(), 500);
  EXPECT_EQ(parse_duration("90")->count(), 90'000);
  EXPECT_FALSE(parse_duration("").has_value());
  EXPECT_FALSE(parse_duration("5x").has_value());
  EXPECT_FALSE(parse_duration("m").has_value());
  EXPECT_EQ(format_duration(5min), "5m0s");
  EXPECT_EQ(format_duration(1min), "1m0s");
  EXPECT_EQ(format_duration(15min), "15m0s");
}

TEST(Strings, TrimAndJoin) {
  EXPECT_EQ(trim(" \t a b \r\n"), "a b");
  EXPECT_EQ(trim("\v\f"), "");
  EXPECT_EQ(trim(""), "");
  EXPECT_EQ(join({}, ", "), "");
  EXPECT_EQ(join({"a"}, ", "), "a");
  EXPECT_EQ(join({"a", "", "c"}, "; "), "a; ; c");
}

TEST(Strings, Utf8PrefixSplitsNoCharacter) {
  EXPECT_EQ(utf8_prefix("short", 10), "short");
  EXPECT_EQ(utf8_prefix("abcdef", 3), "abc");
  const std::string s = "ab\xc3\xa9\xe2\x82\xac";  // "abé€"
  EXPECT_EQ(utf8_prefix(s, 3), "ab");              // é would be split
  EXPECT_EQ(utf8_prefix(s, 4), "ab\xc3\xa9");
  EXPECT_EQ(utf8_prefix(s, 6), "ab\xc3\xa9");  // € would be split
  EXPECT_EQ(utf8_prefix(s, 7), s);
  EXPECT_EQ(utf8_prefix("\x80\x80", 1), "");
}

TEST(Strings, ToLowerChangesAsciiLettersOnly) {
  EXPECT_EQ(to_lower("Transfer-Encoding: CHUNKED"), "transfer-encoding: chunked");
  EXPECT_EQ(to_lower("\xc3\x84z9"), "\xc3\x84z9");
}

TEST(Health, WorstOrdersBySeverity) {
  EXPECT_EQ(worst(Health::kHealthy, Health::kDegraded), Health::kDegraded);
  EXPECT_EQ(worst(Health::kUnhealthy, Health::kDegraded), Health::kUnhealthy);
  EXPECT_EQ(worst(Health::kInitializing, Health::kHealthy), Health::kInitializing);
  EXPECT_EQ(parse_health("Degraded"), Health::kDegraded);
  EXPECT_FALSE(parse_health("degraded").has_value());
}

TEST(Json, MetricCarriesRealSecondsAndMilliseconds) {
  MetricSample m{1704164645250, "cpu", "cpu_used_percent", {}, 12.5};
  auto j = to_json(m);
  EXPECT_EQ(j["unix_seconds"], 1704164645);
  EXPECT_EQ(j["unix_milliseconds"], 1704164645250);
}

TEST(Json, StateHasTimeAndComponent) {
  auto r = single_state("cpu", Health::kDegraded, "hot",
                        SuggestedActions{"", {RepairAction::kRebootSystem}}, nullptr,
                        from_unix_seconds(1704164645));
  auto j = to_json(r.states[0]);
  EXPECT_EQ(j["time"], "2024-01-02T03:04:05Z");
  EXPECT_EQ(j["component"], "cpu");
  EXPECT_EQ(j["health"], "Degraded");
  EXPECT_EQ(j["suggested_actions"]["repair_actions"][0], "REBOOT_SYSTEM");
}

TEST(Metrics, PrometheusTextHasComponentLabelAndType) {
  MetricRegistry reg;
  reg.describe("disk_free_bytes", "Free bytes");
  reg.set("disk", "disk_free_bytes", 42, {{"mount_point", "/"}});
  reg.add("", "gpud_self_total", 1);
  std::string text = reg.prometheus_text();
  EXPECT_NE(text.find("# TYPE disk_free_bytes gauge"), std::string::npos);
  EXPECT_NE(text.find("disk_free_bytes{gpud_component=\"disk\",mount_point=\"/\"} 42"),
            std::string::npos);
  EXPECT_NE(text.find("# TYPE gpud_self_total counter"), std::string::npos);
  auto snap = reg.snapshot(1000);
  ASSERT_EQ(snap.size(), 1u);  // only component series go to history
  EXPECT_EQ(snap[0].labels.at("mount_point"), "/");
}

// Series are stored as one key string and decoded on output: labels come back in name order with
// gpud_component among them, a label value may hold '=', and clearing one component leaves the
// others (including a component whose name is a prefix of it).
TEST(Metrics, SeriesKeysDecodeBackToLabels) {
  MetricRegistry reg;
  reg.set("accelerator-nvidia-power", "power_mw", 7,
          {{"uuid", "GPU-1"}, {"gpu", "0"}, {"pci_bus_id", "0000:18:00.0"}});
  reg.set("accelerator-nvidia-power", "power_mw", 8, {{"uuid", "GPU-2"}, {"gpu", "1"}});
  reg.set("disk", "free", 1, {{"a", "x=y"}, {"z", "q\x1fr"}});
  reg.set("disk2", "free", 2);
  reg.add("", "plain_total", 3, {{"kind", "k"}});
  std::string text = reg.prometheus_text();
  EXPECT_NE(text.find("power_mw{gpu=\"0\",gpud_component=\"accelerator-nvidia-power\","
                      "pci_bus_id=\"0000:18:00.0\",uuid=\"GPU-1\"} 7\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("free{a=\"x=y\",gpud_component=\"disk\",z=\"q r\"} 1\n"), std::string::npos)
      << text;
  EXPECT_NE(text.find("free{gpud_component=\"disk2\"} 2\n"), std::string::npos) << text;
  EXPECT_NE(text.find("plain_total{kind=\"k\"} 3\n"), std::string::npos) << text;
  // A label named gpud_component gives way to the component's own.
  reg.set("disk3", "own", 4, {{"gpud_component", "other"}});
  EXPECT_NE(reg.prometheus_text().find("own{gpud_component=\"disk3\"} 4\n"), std::string::npos)
      << reg.prometheus_text();
  reg.clear_component("disk3");
  auto snap = reg.snapshot(5);
  ASSERT_EQ(snap.size(), 4u);
  EXPECT_EQ(snap[0].component, "disk");
  EXPECT_EQ(snap[0].labels, (Labels{{"a", "x=y"}, {"z", "q r"}}));
  EXPECT_EQ(snap[2].name, "power_mw");
  EXPECT_EQ(snap[2].labels.at("pci_bus_id"), "0000:18:00.0");
  EXPECT_EQ(snap[2].unix_ms, 5);
  reg.clear_component("disk");
  EXPECT_EQ(reg.series_count(), 4u);  // disk2 stays
  reg.clear_series("accelerator-nvidia-power", "power_mw");
  EXPECT_EQ(reg.series_count(), 2u);
}

// Replacing a component's series of one name drops those not given again and leaves another
// component's series of that name.
TEST(Metrics, ReplaceSeriesDropsTheSeriesNotGivenAgain) {
  MetricRegistry reg;
  reg.set("accelerator-nvidia-power", "power_mw", 7, {{"gpu", "0"}});
  reg.set("accelerator-nvidia-power", "power_mw", 8, {{"gpu", "1"}});
  reg.set("other", "power_mw", 9, {{"gpu", "0"}});
  reg.replace_series("accelerator-nvidia-power", "power_mw", {{{{"gpu", "1"}}, 10}});
  auto snap = reg.snapshot(1);
  ASSERT_EQ(snap.size(), 2u);
  EXPECT_EQ(snap[0].component, "accelerator-nvidia-power");
  EXPECT_EQ(snap[0].labels.at("gpu"), "1");
  EXPECT_EQ(snap[0].value, 10);
  EXPECT_EQ(snap[1].component, "other");
}

class CountingComponent : public Component {
 public:
  CountingComponent(const ComponentContext& ctx, std::string name, std::chrono::seconds interval)
      : Component(ctx), name_(std::move(name)), interval_(interval) {}
  std::string_view name() const override { return name_; }
  std::chrono::seconds interval() const override { return interval_; }
  CheckResult check() override {
    ++count;
    return single_state(name_, Health::kDegraded, "checked " + std::to_string(count.load()));
  }
  std::atomic<int> count{0};

 private:
  std::string name_;
  std::chrono::seconds interval_;
};

TEST(Registry, RejectsDuplicatesAndSortsByName) {
  Config cfg;
  ComponentContext ctx{&cfg, nullptr, nullptr};
  Registry reg;
  ASSERT_TRUE(reg.add(std::make_unique<CountingComponent>(ctx, "b", 1s)).ok());
  ASSERT_TRUE(reg.add(std::make_unique<CountingComponent>(ctx, "a", 1s)).ok());
  EXPECT_FALSE(reg.add(std::make_unique<CountingComponent>(ctx, "a", 1s)).ok());
  EXPECT_EQ(reg.names(), (std::vector<std::string>{"a", "b"}));
  EXPECT_NE(reg.find("a"), nullptr);
  EXPECT_EQ(reg.find("c"), nullptr);
}

TEST(Scheduler, ChecksOnStartAndCachesLastResult) {
  Config cfg;
  ComponentContext ctx{&cfg, nullptr, nullptr};
  Registry reg;
  ASSERT_TRUE(reg.add(std::make_unique<CountingComponent>(ctx, "a", 3600s)).ok());
  auto* a = static_cast<CountingComponent*>(reg.find("a"));
  Scheduler sched(reg, 2);
  EXPECT_EQ(sched.last_states(*a)[0].health, Health::kInitializing);
  sched.start();
  for (int i = 0; i < 200 && a->count == 0; ++i) std::this_thread::sleep_for(10ms);
  std::this_thread::sleep_for(20ms);
  EXPECT_EQ(a->count, 1);
  EXPECT_EQ(sched.last_states(*a)[0].health, Health::kDegraded);
  sched.trigger("a");
  for (int i = 0; i < 200 && a->count < 2; ++i) std::this_thread::sleep_for(10ms);
  EXPECT_EQ(a->count, 2);
  sched.stop();
}

// read_last_states hands over each component's cached states in the order asked, the placeholder
// for one not checked yet, the same as last_states gives in copies.
// snapshot_in_chunks hands over what snapshot() holds, in the same order, a few families at a
// time and never splitting one; the registry is unlocked while each chunk is taken.
TEST(MetricRegistry, SnapshotInChunksGivesTheSnapshotAFewFamiliesAtATime) {
  MetricRegistry m;
  for (int f = 0; f < 5; ++f)
    for (int g = 0; g < 3; ++g)
      m.set("comp", "family_" + std::to_string(f), f * 10 + g, {{"gpu", std::to_string(g)}});
  m.set("", "process_wide", 1);  // not a component's: in neither
  const auto whole = m.snapshot(42);
  ASSERT_EQ(whole.size(), 15u);
  std::vector<MetricSample> joined;
  std::vector<size_t> sizes;
  m.snapshot_in_chunks(42, 4, [&](const std::vector<MetricSample>& chunk) {
    sizes.push_back(chunk.size());
    joined.insert(joined.end(), chunk.begin(), chunk.end());
    m.set("comp", "family_9", 1);  // unlocked: a family added meanwhile comes in a later chunk
  });
  // At least 4 a chunk, whole families of 3: 6, 6, then the rest.
  ASSERT_GE(sizes.size(), 3u);
  EXPECT_EQ(sizes[0], 6u);
  EXPECT_EQ(sizes[1], 6u);
  ASSERT_EQ(joined.size(), 16u);
  for (size_t i = 0; i < whole.size(); ++i) {
    EXPECT_EQ(joined[i].name, whole[i].name) << i;
    EXPECT_EQ(joined[i].labels, whole[i].labels) << i;
    EXPECT_EQ(joined[i].value, whole[i].value) << i;
    EXPECT_EQ(joined[i].unix_ms, 42);
  }
  EXPECT_EQ(joined.back().name, "family_9");
  MetricRegistry empty;
  int calls = 0;
  empty.snapshot_in_chunks(1, 4, [&](const std::vector<MetricSample>&) { ++calls; });
  EXPECT_EQ(calls, 0);
}

TEST(Scheduler, ReadLastStatesGivesTheCachedStatesInPlace) {
  Config cfg;
  ComponentContext ctx{&cfg, nullptr, nullptr};
  Registry reg;
  ASSERT_TRUE(reg.add(std::make_unique<CountingComponent>(ctx, "a", 3600s)).ok());
  ASSERT_TRUE(reg.add(std::make_unique<CountingComponent>(ctx, "b", 3600s)).ok());
  auto* a = static_cast<CountingComponent*>(reg.find("a"));
  auto* b = static_cast<CountingComponent*>(reg.find("b"));
  Scheduler sched(reg, 2);
  sched.run_now(*b);
  std::vector<std::pair<std::string, Health>> seen;
  std::string b_reason;
  int calls = 0;
  sched.read_last_states({b, a}, [&](const std::vector<const HealthState*>& states) {
    ++calls;
    for (const HealthState* s : states) seen.emplace_back(s->component, s->health);
    if (!states.empty()) b_reason = states[0]->reason;
  });
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(seen, (std::vector<std::pair<std::string, Health>>{{"b", Health::kDegraded},
                                                               {"a", Health::kInitializing}}));
  EXPECT_EQ(b_reason, sched.last_states(*b)[0].reason);
  sched.read_last_states({}, [&](const std::vector<const HealthState*>& states) {
    ++calls;
    EXPECT_TRUE(states.empty());
  });
  EXPECT_EQ(calls, 2);
}

// A component whose health the test sets, and whose check can be held until the test releases it.
class SettableComponent : public Component {
 public:
  SettableComponent(const ComponentContext& ctx, std::string name) : Component(ctx), name_(name) {}
  std::string_view name() const override { return name_; }
  std::chrono::seconds interval() const override { return 3600s; }
  bool supported() const override { return supported_.load(); }
  CheckResult check() override {
    ++entered;
    if (order != nullptr) {
      std::lock_guard lock(*order_mu);
      order->push_back(name_);
    }
    while (hold) std::this_thread::sleep_for(1ms);
    CheckResult r = single_state(name_, health.load(), "set by the test");
    ++count;
    return r;
  }
  std::atomic<Health> health{Health::kHealthy};
  std::atomic<bool> hold{false};
  std::atomic<int> entered{0};  // checks begun
  std::atomic<int> count{0};    // checks finished
  // When set, each check appends the component's name (under order_mu) as it begins.
  std::vector<std::string>* order = nullptr;
  std::mutex* order_mu = nullptr;
  std::atomic<bool> supported_{true};

 private:
  std::string name_;
};

SettableComponent* add_settable(Registry& reg, const ComponentContext& ctx, std::string name) {
  auto c = std::make_unique<SettableComponent>(ctx, std::move(name));
  auto* raw = c.get();
  EXPECT_TRUE(reg.add(std::move(c)).ok());
  return raw;
}

// The components named first (the container runtimes the others trace processes through) are
// checked before any other component's first check; the others go ahead once they finish, an
// unsupported one counting as finished.
TEST(Scheduler, ChecksTheFirstComponentsBeforeTheOthers) {
  Config cfg;
  ComponentContext ctx{&cfg, nullptr, nullptr};
  Registry reg;
  auto* reads = add_settable(reg, ctx, "a-reads");
  auto* lister = add_settable(reg, ctx, "lister");
  add_settable(reg, ctx, "absent-runtime")->supported_ = false;
  lister->hold = true;
  Scheduler sched(reg, 2);
  sched.start({"lister", "absent-runtime", "not-registered"}, 30s);
  EXPECT_FALSE(sched.wait_first_checks(300ms));
  EXPECT_EQ(reads->count, 0);  // a free worker waits for the lister rather than running it
  lister->hold = false;
  EXPECT_TRUE(sched.wait_first_checks(5s));
  EXPECT_EQ(lister->count, 1);
  for (int i = 0; i < 500 && reads->count == 0; ++i) std::this_thread::sleep_for(10ms);
  EXPECT_EQ(reads->count, 1);
  sched.stop();
}

// A first component that hangs holds the others back for first_wait only.
TEST(Scheduler, OthersGoAheadWhenTheFirstComponentsTakeTooLong) {
  Config cfg;
  ComponentContext ctx{&cfg, nullptr, nullptr};
  Registry reg;
  auto* reads = add_settable(reg, ctx, "a-reads");
  auto* lister = add_settable(reg, ctx, "lister");
  lister->hold = true;
  Scheduler sched(reg, 2);
  auto t0 = std::chrono::steady_clock::now();
  sched.start({"lister"}, 200ms);
  EXPECT_FALSE(sched.wait_first_checks(5s));  // bounded by first_wait, not by the 5 s
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 2s);
  for (int i = 0; i < 500 && reads->count == 0; ++i) std::this_thread::sleep_for(10ms);
  EXPECT_EQ(reads->count, 1);
  EXPECT_EQ(lister->count, 0);
  lister->hold = false;
  sched.stop();
}

// A trigger that comes while the component's check runs (a kernel-log line stored after the check
// read the store) checks it again right after, not at its next interval (an hour here).
TEST(Scheduler, ATriggerDuringACheckChecksAgainAfterIt) {
  Config cfg;
  ComponentContext ctx{&cfg, nullptr, nullptr};
  Registry reg;
  auto* xid = add_settable(reg, ctx, "xid");
  xid->hold = true;
  Scheduler sched(reg, 2);
  sched.start();
  for (int i = 0; i < 500 && xid->entered == 0; ++i) std::this_thread::sleep_for(10ms);
  ASSERT_EQ(xid->entered, 1);
  sched.trigger("xid");  // while the first check is held
  xid->hold = false;
  for (int i = 0; i < 500 && xid->count < 2; ++i) std::this_thread::sleep_for(10ms);
  EXPECT_EQ(xid->count, 2);
  sched.stop();
}

// A triggered check goes before the checks that are merely due: with one worker busy and two
// components waiting for their first check, the one triggered meanwhile runs first.
TEST(Scheduler, ATriggeredCheckGoesBeforeTheDueOnes) {
  Config cfg;
  ComponentContext ctx{&cfg, nullptr, nullptr};
  Registry reg;
  std::mutex mu;
  std::vector<std::string> order;
  for (const char* n : {"a-busy", "m-due", "n-due", "z-triggered"}) {
    auto* c = add_settable(reg, ctx, n);
    c->order = &order;
    c->order_mu = &mu;
  }
  auto* busy = static_cast<SettableComponent*>(reg.find("a-busy"));
  busy->hold = true;
  Scheduler sched(reg, 1);
  sched.start();
  for (int i = 0; i < 500 && busy->entered == 0; ++i) std::this_thread::sleep_for(10ms);
  ASSERT_EQ(busy->entered, 1);
  sched.trigger("z-triggered");
  busy->hold = false;
  auto* last = static_cast<SettableComponent*>(reg.find("n-due"));
  for (int i = 0; i < 500 && last->count == 0; ++i) std::this_thread::sleep_for(10ms);
  sched.stop();
  std::lock_guard lock(mu);
  EXPECT_EQ(order, (std::vector<std::string>{"a-busy", "z-triggered", "m-due", "n-due"}));
}

// The value of gpud_component_health{component,health} in the exposition text, or -1 when absent.
double component_health(const MetricRegistry& m, const std::string& component,
                        const std::string& health) {
  std::string text = m.prometheus_text();
  std::string key =
      "gpud_component_health{component=\"" + component + "\",health=\"" + health + "\"} ";
  size_t pos = text.find(key);
  if (pos == std::string::npos) return -1;
  return std::stod(text.substr(pos + key.size()));
}

// Each change of health is logged once, naming the component, both healths, the reason and the
// suggested action; a steady health and a healthy start log nothing.
TEST(Scheduler, LogsEachHealthTransitionOnce) {
  Config cfg;
  ComponentContext ctx{&cfg, nullptr, nullptr};
  Registry reg;
  ASSERT_TRUE(reg.add(std::make_unique<SettableComponent>(ctx, "transitions-test")).ok());
  auto* a = static_cast<SettableComponent*>(reg.find("transitions-test"));
  Scheduler sched(reg, 1);
  testing::LogCapture log("transitions-test");
  sched.run_now(*a);  // Initializing -> Healthy: start-up, not logged
  sched.run_now(*a);
  EXPECT_EQ(log.text(), "");
  a->health = Health::kUnhealthy;
  sched.run_now(*a);
  sched.run_now(*a);  // still Unhealthy: not logged again
  a->health = Health::kHealthy;
  sched.run_now(*a);
  EXPECT_EQ(log.text(),
            "component transitions-test: Healthy -> Unhealthy: set by the test\n"
            "component transitions-test: Unhealthy -> Healthy: set by the test\n");
}

TEST(HealthTransition, NamesTheWorstStatesReasonsAndActionsAndItsLevel) {
  CheckResult before = single_state("xid", Health::kHealthy, "ok");
  CheckResult after;
  after.states.push_back(single_state("xid", Health::kUnhealthy, "XID 79 on 0000:3b:00.0",
                                      SuggestedActions{"reboot", {RepairAction::kRebootSystem}})
                             .states.front());
  after.states.push_back(single_state("xid", Health::kDegraded, "XID 13").states.front());
  auto t = health_transition("accelerator-nvidia-error-xid", &before, after);
  ASSERT_TRUE(t);
  EXPECT_EQ(t->line,
            "component accelerator-nvidia-error-xid: Healthy -> Unhealthy: XID 79 on 0000:3b:00.0 "
            "(suggested: REBOOT_SYSTEM)");
  EXPECT_TRUE(t->warning());
  // A first result that is not Healthy is a transition; recovering is one at info level.
  EXPECT_TRUE(health_transition("x", nullptr, after));
  auto back = health_transition("x", &after, before);
  ASSERT_TRUE(back);
  EXPECT_FALSE(back->warning());
  EXPECT_FALSE(health_transition("x", nullptr, before));
  EXPECT_FALSE(health_transition("x", &before, before));
}

// At the same health, a new reason (a second GPU failing) is logged; numbers moving is not.
TEST(Scheduler, AChangeOfReasonAtTheSameHealthIsLoggedAndMovingNumbersAreNot) {
  auto unhealthy = [](const std::string& reason) {
    return single_state("x", Health::kUnhealthy, reason,
                        SuggestedActions{"reboot", {RepairAction::kRebootSystem}});
  };
  const CheckResult one = unhealthy("GPU 3 (0000:5d:00.0) lost");
  const CheckResult two = unhealthy("GPU 3 (0000:5d:00.0) lost; GPU 5 (0000:9a:00.0) lost");
  auto t = health_transition("accelerator-nvidia-info", &one, two);
  ASSERT_TRUE(t);
  EXPECT_EQ(t->line,
            "component accelerator-nvidia-info: still Unhealthy, now: GPU 3 (0000:5d:00.0) lost; "
            "GPU 5 (0000:9a:00.0) lost (suggested: REBOOT_SYSTEM)");
  EXPECT_TRUE(t->warning());
  // Only a duration moved: not a change.
  const CheckResult down_a_while = unhealthy("mlx5_3 port 1 down 4m10s");
  EXPECT_FALSE(health_transition("x", &down_a_while, unhealthy("mlx5_3 port 1 down 12m0s")));
  // Another action at the same reasons is one.
  CheckResult inspect = one;
  inspect.states[0].suggested_actions->repair_actions = {RepairAction::kHardwareInspection};
  EXPECT_TRUE(health_transition("x", &one, inspect));
  // A Healthy component's reason changing is not logged.
  const CheckResult ok1 = single_state("x", Health::kHealthy, "cpu usage 3%");
  const CheckResult ok2 = single_state("x", Health::kHealthy, "all fine");
  EXPECT_FALSE(health_transition("x", &ok1, ok2));
}

TEST(Scheduler, PublishesComponentHealthGaugeOnePerHealthValue) {
  Config cfg;
  MetricRegistry metrics;
  ComponentContext ctx{&cfg, nullptr, &metrics};
  Registry reg;
  ASSERT_TRUE(reg.add(std::make_unique<SettableComponent>(ctx, "a")).ok());
  ASSERT_TRUE(reg.add(std::make_unique<SettableComponent>(ctx, "hidden")).ok());
  auto* a = static_cast<SettableComponent*>(reg.find("a"));
  static_cast<SettableComponent*>(reg.find("hidden"))->supported_ = false;
  a->hold = true;
  a->health = Health::kUnhealthy;
  Scheduler sched(reg, 2, &metrics);
  EXPECT_EQ(component_health(metrics, "a", "Initializing"), -1);  // nothing before start()
  sched.start();
  // While the first check runs, the component is Initializing.
  EXPECT_EQ(component_health(metrics, "a", "Initializing"), 1);
  EXPECT_EQ(component_health(metrics, "a", "Healthy"), 0);
  EXPECT_EQ(component_health(metrics, "a", "Degraded"), 0);
  EXPECT_EQ(component_health(metrics, "a", "Unhealthy"), 0);
  EXPECT_EQ(component_health(metrics, "hidden", "Healthy"), -1);  // unsupported: no series
  a->hold = false;
  for (int i = 0; i < 500 && component_health(metrics, "a", "Unhealthy") != 1; ++i)
    std::this_thread::sleep_for(10ms);
  EXPECT_EQ(component_health(metrics, "a", "Unhealthy"), 1);
  EXPECT_EQ(component_health(metrics, "a", "Initializing"), 0);
  EXPECT_EQ(component_health(metrics, "a", "Healthy"), 0);

  a->health = Health::kDegraded;
  sched.trigger("a");
  for (int i = 0; i < 500 && component_health(metrics, "a", "Degraded") != 1; ++i)
    std::this_thread::sleep_for(10ms);
  EXPECT_EQ(component_health(metrics, "a", "Degraded"), 1);
  EXPECT_EQ(component_health(metrics, "a", "Unhealthy"), 0);

  // A component that turns out not to apply is hidden: its series go.
  a->supported_ = false;
  sched.trigger("a");
  for (int i = 0; i < 500 && component_health(metrics, "a", "Degraded") != -1; ++i)
    std::this_thread::sleep_for(10ms);
  EXPECT_EQ(component_health(metrics, "a", "Degraded"), -1);
  EXPECT_EQ(component_health(metrics, "a", "Healthy"), -1);
  sched.stop();
  a->supported_ = true;

  // run_now publishes too, and the family passes as a gauge with its help text.
  a->health = Health::kHealthy;
  sched.run_now(*a);
  EXPECT_EQ(component_health(metrics, "a", "Healthy"), 1);
  EXPECT_EQ(component_health(metrics, "a", "Degraded"), 0);
  std::string text = metrics.prometheus_text();
  EXPECT_NE(text.find("# TYPE gpud_component_health gauge"), std::string::npos) << text;
  EXPECT_NE(text.find("# HELP gpud_component_health Health of each"), std::string::npos) << text;
  // Health series are not component series: they stay out of the metric history.
  EXPECT_TRUE(metrics.snapshot(1000).empty());
}

// A component whose states (health and suggested actions) the test sets; checked with run_now.
class ActionsComponent : public Component {
 public:
  ActionsComponent(const ComponentContext& ctx, std::string name) : Component(ctx), name_(name) {}
  std::string_view name() const override { return name_; }
  std::chrono::seconds interval() const override { return 3600s; }
  CheckResult check() override { return result; }
  bool supported() const override { return supported_; }
  CheckResult result;
  bool supported_ = true;

 private:
  std::string name_;
};

CheckResult states_with(std::vector<std::pair<Health, std::vector<RepairAction>>> states) {
  CheckResult r;
  for (auto& [health, actions] : states) {
    HealthState s;
    s.health = health;
    if (!actions.empty()) s.suggested_actions = SuggestedActions{"test", actions};
    r.states.push_back(s);
  }
  return r;
}

// The value of gpud_component_suggested_action{component,action}, or -1 when absent.
double suggested_action(const MetricRegistry& m, const std::string& component,
                        const std::string& action) {
  std::string text = m.prometheus_text();
  std::string key =
      "gpud_component_suggested_action{action=\"" + action + "\",component=\"" + component + "\"} ";
  size_t pos = text.find(key);
  if (pos == std::string::npos) return -1;
  return std::stod(text.substr(pos + key.size()));
}

TEST(Scheduler, PublishesTheSuggestedActionsOfDegradedAndUnhealthyStates) {
  Config cfg;
  MetricRegistry metrics;
  ComponentContext ctx{&cfg, nullptr, &metrics};
  Registry reg;
  ASSERT_TRUE(reg.add(std::make_unique<ActionsComponent>(ctx, "xid")).ok());
  ASSERT_TRUE(reg.add(std::make_unique<ActionsComponent>(ctx, "disk")).ok());
  auto* xid = static_cast<ActionsComponent*>(reg.find("xid"));
  auto* disk = static_cast<ActionsComponent*>(reg.find("disk"));
  Scheduler sched(reg, 1, &metrics);

  // Healthy states name no action, even when one carries suggestions.
  xid->result = states_with({{Health::kHealthy, {RepairAction::kRebootSystem}}});
  sched.run_now(*xid);
  EXPECT_EQ(suggested_action(metrics, "xid", "REBOOT_SYSTEM"), -1);

  xid->result = states_with({{Health::kUnhealthy, {RepairAction::kRebootSystem}}});
  disk->result = states_with(
      {{Health::kHealthy, {}}, {Health::kDegraded, {RepairAction::kHardwareInspection}}});
  sched.run_now(*xid);
  sched.run_now(*disk);
  EXPECT_EQ(suggested_action(metrics, "xid", "REBOOT_SYSTEM"), 1);
  EXPECT_EQ(suggested_action(metrics, "disk", "HARDWARE_INSPECTION"), 1);
  std::string text = metrics.prometheus_text();
  EXPECT_NE(text.find("# TYPE gpud_component_suggested_action gauge"), std::string::npos);

  // The fault escalates: the old action goes, the other component's stays.
  xid->result = states_with({{Health::kUnhealthy, {RepairAction::kHardwareInspection}}});
  sched.run_now(*xid);
  EXPECT_EQ(suggested_action(metrics, "xid", "REBOOT_SYSTEM"), -1);
  EXPECT_EQ(suggested_action(metrics, "xid", "HARDWARE_INSPECTION"), 1);
  EXPECT_EQ(suggested_action(metrics, "disk", "HARDWARE_INSPECTION"), 1);

  // Set healthy: no series for the component; a hidden component has none either.
  xid->result = states_with({{Health::kHealthy, {}}});
  sched.run_now(*xid);
  EXPECT_EQ(suggested_action(metrics, "xid", "HARDWARE_INSPECTION"), -1);
  disk->supported_ = false;
  sched.run_now(*disk);
  EXPECT_EQ(suggested_action(metrics, "disk", "HARDWARE_INSPECTION"), -1);
  // Not component series: they stay out of the metric history.
  EXPECT_TRUE(metrics.snapshot(1000).empty());
}

TEST(Scheduler, WithoutMetricsPublishesNothing) {
  Config cfg;
  MetricRegistry metrics;
  ComponentContext ctx{&cfg, nullptr, &metrics};
  Registry reg;
  ASSERT_TRUE(reg.add(std::make_unique<SettableComponent>(ctx, "a")).ok());
  Scheduler sched(reg, 1);
  sched.run_now(*reg.find("a"));
  EXPECT_EQ(metrics.series_count(), 0u);
}

}  // namespace
}  // namespace gpud
