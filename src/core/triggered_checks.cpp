#include "core/triggered_checks.h"

#include <algorithm>
#include <utility>

namespace gpud {

TriggeredChecks::TriggeredChecks(Scheduler& scheduler, size_t workers) : scheduler_(scheduler) {
  if (workers == 0) workers = 1;
  for (size_t i = 0; i < workers; ++i) threads_.emplace_back([this] { worker_loop(); });
}

TriggeredChecks::~TriggeredChecks() { stop(); }

Result<TriggeredChecks::Run> TriggeredChecks::trigger(Component& c) {
  std::lock_guard lock(mu_);
  if (stopping_) return make_error("gpud is stopping; the check was not run", 503);
  if (auto it = runs_.find(c.name()); it != runs_.end() && it->second.component == &c)
    return it->second.run;
  // A component of the same name that was deregistered and registered again while its old
  // object's run is still under way: the new one queues after it.
  if (runs_.contains(c.name()))
    return make_error("a check of a replaced component " + std::string(c.name()) +
                          " is still running; try again when it has finished",
                      409);
  Pending& p = runs_[std::string(c.name())];
  p.component = &c;
  p.run = p.promise.get_future().share();
  queue_.emplace_back(c.name());
  cv_.notify_one();
  return p.run;
}

void TriggeredChecks::worker_loop() {
  std::unique_lock lock(mu_);
  while (true) {
    cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    if (stopping_) return;
    std::string name = std::move(queue_.front());
    queue_.pop_front();
    Component* c = runs_.at(name).component;
    lock.unlock();
    // run_now() catches what a check throws.
    CheckResult r = scheduler_.run_now(*c);
    lock.lock();
    // A trigger from now on starts a new run.
    runs_.extract(name).mapped().promise.set_value(std::move(r));
    done_cv_.notify_all();
  }
}

bool TriggeredChecks::wait(const std::vector<Run>& runs,
                           std::chrono::steady_clock::time_point deadline) {
  auto finished = [&] {
    return std::all_of(runs.begin(), runs.end(), [](const Run& r) {
      return r.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
    });
  };
  std::unique_lock lock(mu_);
  done_cv_.wait_until(lock, deadline, [&] { return stopping_ || finished(); });
  return finished();
}

void TriggeredChecks::stop() {
  {
    std::lock_guard lock(mu_);
    if (stopping_ && threads_.empty()) return;
    stopping_ = true;
    for (const std::string& name : queue_)
      runs_.extract(name).mapped().promise.set_value(single_state(
          name, Health::kUnhealthy, "check not run: gpud stopped before its turn came"));
    queue_.clear();
  }
  cv_.notify_all();
  done_cv_.notify_all();
  for (auto& t : threads_)
    if (t.joinable()) t.join();
  threads_.clear();
}

}  // namespace gpud
