// TriggeredChecks: runs the checks that a request asks for now (trigger-check, trigger-tag) on a
// small pool of its own, so that a slow check (a custom plugin that loads the GPUs for a minute)
// holds neither the scheduler's workers nor the API's. A trigger of a check that is already queued
// or running joins that run: every caller gets the same result, and a burst of triggers costs one
// run, not one each.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <future>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/result.h"
#include "core/scheduler.h"

namespace gpud {

class TriggeredChecks {
 public:
  // A run's result, ready once the check finished (and the scheduler cached it).
  using Run = std::shared_future<CheckResult>;

  // `workers` threads (at least one) run the triggered checks through scheduler.run_now(), which
  // waits for a scheduled check of the same component to finish first.
  explicit TriggeredChecks(Scheduler& scheduler, size_t workers = 2);
  ~TriggeredChecks();
  TriggeredChecks(const TriggeredChecks&) = delete;
  TriggeredChecks& operator=(const TriggeredChecks&) = delete;

  // The run of c's check that is queued or running now, else a new one queued. Queued runs are one
  // per component, so the queue is bounded by the registry. Error after stop().
  [[nodiscard]] Result<Run> trigger(Component& c);
  // Waits until every run has finished, `deadline` passes or stop() begins; true when all finished.
  bool wait(const std::vector<Run>& runs, std::chrono::steady_clock::time_point deadline);
  // Stops taking triggers, answers the runs still queued with an Unhealthy "not run" result, ends
  // every wait(), and waits for the running checks (each bounded by its check).
  void stop();

 private:
  struct Pending {
    Component* component = nullptr;
    std::promise<CheckResult> promise;
    Run run;
  };
  void worker_loop();

  Scheduler& scheduler_;
  std::mutex mu_;
  std::condition_variable cv_;       // a run was queued, or stop() began
  std::condition_variable done_cv_;  // a run finished, or stop() began
  bool stopping_ = false;
  // Queued or running, by component name; the queue holds the names of those not started.
  std::map<std::string, Pending, std::less<>> runs_;
  std::deque<std::string> queue_;
  std::vector<std::thread> threads_;
};

}  // namespace gpud
