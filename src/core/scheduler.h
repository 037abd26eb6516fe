// Scheduler: runs each component's check() on its interval on a small worker pool and caches the
// last result.
#pragma once

#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/registry.h"

namespace gpud {

class Scheduler {
 public:
  explicit Scheduler(const Registry& registry, size_t workers = 2);
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Checks every supported component once right away, then each on its interval.
  void start();
  void stop();  // bounded: waits for running checks to finish

  // The cached states; one Initializing "no data yet" state before the first check finished.
  std::vector<HealthState> last_states(const Component& c) const;
  // Runs the check now on the caller's thread and caches the result.
  CheckResult run_now(Component& c);
  // Schedules an immediate re-check (e.g. after set-healthy or a new kernel message).
  void trigger(std::string_view name);

 private:
  void worker_loop();
  void store_result(const Component& c, CheckResult r);

  const Registry& registry_;
  size_t worker_count_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::map<std::string, std::chrono::steady_clock::time_point, std::less<>> next_due_;
  std::map<std::string, bool, std::less<>> running_;
  std::map<std::string, CheckResult, std::less<>> last_;
  std::vector<std::thread> threads_;
};

}  // namespace gpud
