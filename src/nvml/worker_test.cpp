#include "nvml/worker.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

namespace gpud::nvml {
namespace {

using namespace std::chrono_literals;
using SteadyClock = std::chrono::steady_clock;

TEST(NvmlWorker, RunsJobsAndReturnsValues) {
  Worker w;
  auto r = w.call([] { return 41 + 1; }, 1s);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, 42);
  auto e = w.call([] { return Result<int>(make_error("boom")); }, 1s);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.error().message, "boom");
  EXPECT_FALSE(is_timeout(e.error()));
}

TEST(NvmlWorker, JobPastDeadlineTimesOutAndLaterCallsFailFast) {
  Worker w;
  auto release = std::make_shared<std::atomic<bool>>(false);
  auto start = SteadyClock::now();
  auto r = w.run(
      [release] {
        while (!release->load()) std::this_thread::sleep_for(5ms);
      },
      100ms);
  auto took = SteadyClock::now() - start;
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(is_timeout(r.error()));
  EXPECT_EQ(r.error().message, kTimeoutMessage);
  EXPECT_LT(took, 400ms);
  EXPECT_TRUE(w.stuck());

  start = SteadyClock::now();
  auto fast = w.call([] { return 1; }, 5s);
  EXPECT_FALSE(fast.ok());
  EXPECT_TRUE(is_timeout(fast.error()));
  EXPECT_LT(SteadyClock::now() - start, 50ms);

  // Once the stuck call returns the worker serves again.
  release->store(true);
  for (int i = 0; i < 100 && w.stuck(); ++i) std::this_thread::sleep_for(10ms);
  EXPECT_FALSE(w.stuck());
  auto again = w.call([] { return 7; }, 1s);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, 7);
}

TEST(NvmlWorker, QueuedCallersFailWhenTheWorkerGetsStuck) {
  Worker w;
  auto release = std::make_shared<std::atomic<bool>>(false);
  std::thread stuck_caller([&] {
    (void)w.run(
        [release] {
          while (!release->load()) std::this_thread::sleep_for(5ms);
        },
        150ms);
  });
  std::this_thread::sleep_for(20ms);
  auto start = SteadyClock::now();
  auto queued = w.call([] { return 1; }, 5s);  // queued behind the hung call
  EXPECT_FALSE(queued.ok());
  EXPECT_TRUE(is_timeout(queued.error()));
  EXPECT_LT(SteadyClock::now() - start, 1s);
  stuck_caller.join();
  release->store(true);
}

TEST(NvmlWorker, StopDetachesAStuckThreadWithoutBlocking) {
  auto release = std::make_shared<std::atomic<bool>>(false);
  auto start = SteadyClock::now();
  {
    Worker w;
    (void)w.run(
        [release] {
          while (!release->load()) std::this_thread::sleep_for(5ms);
        },
        50ms);
    EXPECT_FALSE(w.stop(100ms));
  }
  EXPECT_LT(SteadyClock::now() - start, 1s);
  release->store(true);
  std::this_thread::sleep_for(50ms);  // let the detached thread finish before the test exits
}

TEST(NvmlWorker, StopJoinsAnIdleWorker) {
  Worker w;
  EXPECT_TRUE(w.stop());
  auto r = w.call([] { return 1; }, 100ms);
  EXPECT_FALSE(r.ok());
}

}  // namespace
}  // namespace gpud::nvml
