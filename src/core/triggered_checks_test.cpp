#include "core/triggered_checks.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <future>
#include <mutex>
#include <thread>

#include "core/registry.h"

namespace gpud {
namespace {

using namespace std::chrono_literals;

// A check that blocks until the test opens the gate, counting its runs and those running now.
class GatedComponent : public Component {
 public:
  GatedComponent(const ComponentContext& ctx, std::string name)
      : Component(ctx), name_(std::move(name)) {}
  std::string_view name() const override { return name_; }
  CheckResult check() override {
    const int run = ++runs;
    ++running;
    std::unique_lock lock(mu_);
    cv_.wait(lock, [this] { return open_; });
    --running;
    return single_state(name_, Health::kHealthy, "run " + std::to_string(run));
  }
  void open() {
    {
      std::lock_guard lock(mu_);
      open_ = true;
    }
    cv_.notify_all();
  }
  std::atomic<int> runs{0};
  std::atomic<int> running{0};

 private:
  std::string name_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = false;
};

bool eventually(const std::function<bool()>& f) {
  for (auto until = std::chrono::steady_clock::now() + 5s; std::chrono::steady_clock::now() < until;
       std::this_thread::sleep_for(5ms))
    if (f()) return true;
  return f();
}

class TriggeredChecksTest : public ::testing::Test {
 protected:
  GatedComponent* add(const std::string& name) {
    auto c = std::make_unique<GatedComponent>(ctx_, name);
    GatedComponent* raw = c.get();
    EXPECT_TRUE(registry_.add(std::move(c)).ok());
    return raw;
  }
  Config config_;
  ComponentContext ctx_{&config_, nullptr, nullptr};
  Registry registry_;
  Scheduler scheduler_{registry_};
};

TEST_F(TriggeredChecksTest, ASecondTriggerJoinsTheRunningCheck) {
  GatedComponent* slow = add("slow-plugin");
  TriggeredChecks triggers(scheduler_, 2);
  auto first = triggers.trigger(*slow);
  ASSERT_TRUE(first.ok());
  ASSERT_TRUE(eventually([&] { return slow->running == 1; }));
  auto second = triggers.trigger(*slow);
  ASSERT_TRUE(second.ok());
  EXPECT_FALSE(triggers.wait({*first, *second}, std::chrono::steady_clock::now() + 50ms));
  slow->open();
  EXPECT_TRUE(triggers.wait({*first, *second}, std::chrono::steady_clock::now() + 5s));
  EXPECT_EQ(slow->runs, 1);
  EXPECT_EQ(first->get().states[0].reason, "run 1");
  EXPECT_EQ(second->get().states[0].reason, "run 1");
  // The scheduler cached the triggered result, as /v1/states serves it.
  EXPECT_EQ(scheduler_.last_states(*slow)[0].reason, "run 1");
  // Once finished, a trigger is a new run.
  auto third = triggers.trigger(*slow);
  ASSERT_TRUE(third.ok());
  EXPECT_TRUE(triggers.wait({*third}, std::chrono::steady_clock::now() + 5s));
  EXPECT_EQ(third->get().states[0].reason, "run 2");
}

TEST_F(TriggeredChecksTest, RunsOnABoundedPoolOfItsOwn) {
  std::vector<GatedComponent*> comps;
  for (const char* name : {"a", "b", "c", "d"}) comps.push_back(add(name));
  TriggeredChecks triggers(scheduler_, 2);
  std::vector<TriggeredChecks::Run> runs;
  for (GatedComponent* c : comps) {
    auto r = triggers.trigger(*c);
    ASSERT_TRUE(r.ok());
    runs.push_back(*r);
  }
  ASSERT_TRUE(eventually([&] { return comps[0]->running + comps[1]->running == 2; }));
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(comps[2]->runs + comps[3]->runs, 0) << "more checks ran at once than the pool has";
  for (GatedComponent* c : comps) c->open();
  EXPECT_TRUE(triggers.wait(runs, std::chrono::steady_clock::now() + 5s));
  for (GatedComponent* c : comps) EXPECT_EQ(c->runs, 1) << c->name();
}

TEST_F(TriggeredChecksTest, StopAnswersQueuedRunsAndEndsWaits) {
  GatedComponent* running = add("running");
  GatedComponent* queued = add("queued");
  TriggeredChecks triggers(scheduler_, 1);
  auto first = triggers.trigger(*running);
  auto second = triggers.trigger(*queued);
  ASSERT_TRUE(first.ok() && second.ok());
  ASSERT_TRUE(eventually([&] { return running->running == 1; }));
  std::atomic<bool> waited{false};
  std::thread waiter([&] {
    (void)triggers.wait({*first}, std::chrono::steady_clock::now() + 60s);
    waited = true;
  });
  std::thread stopper([&] { triggers.stop(); });
  EXPECT_TRUE(eventually([&] { return waited.load(); })) << "stop() left a wait() waiting";
  running->open();
  stopper.join();
  waiter.join();
  ASSERT_EQ(second->wait_for(0s), std::future_status::ready);
  EXPECT_EQ(second->get().health(), Health::kUnhealthy);
  EXPECT_EQ(second->get().states[0].reason, "check not run: gpud stopped before its turn came");
  EXPECT_EQ(queued->runs, 0);
  EXPECT_EQ(first->get().states[0].reason, "run 1");
  EXPECT_FALSE(triggers.trigger(*running).ok());
}

}  // namespace
}  // namespace gpud
