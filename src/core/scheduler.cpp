#include "core/scheduler.h"

#include <spdlog/spdlog.h>

#include <algorithm>

namespace gpud {

using SteadyClock = std::chrono::steady_clock;

Scheduler::Scheduler(const Registry& registry, size_t workers)
    : registry_(registry), worker_count_(workers == 0 ? 1 : workers) {}

Scheduler::~Scheduler() { stop(); }

void Scheduler::start() {
  std::lock_guard lock(mu_);
  if (!threads_.empty()) return;
  stopping_ = false;
  auto now = SteadyClock::now();
  // Unsupported components are scheduled too: one may become supported later (NVML loads after
  // start).
  for (Component* c : registry_.all()) next_due_[std::string(c->name())] = now;
  for (size_t i = 0; i < worker_count_; ++i) threads_.emplace_back([this] { worker_loop(); });
}

void Scheduler::stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  for (auto& t : threads_)
    if (t.joinable()) t.join();
  threads_.clear();
}

void Scheduler::worker_loop() {
  std::unique_lock lock(mu_);
  while (!stopping_) {
    Component* next = nullptr;
    auto earliest = SteadyClock::time_point::max();
    for (auto& [name, due] : next_due_) {
      if (running_[name]) continue;
      if (due < earliest) {
        earliest = due;
        next = registry_.find(name);
      }
    }
    auto now = SteadyClock::now();
    if (next == nullptr || earliest > now) {
      if (earliest == SteadyClock::time_point::max())
        cv_.wait(lock);
      else
        cv_.wait_until(lock, earliest);
      continue;
    }
    std::string name(next->name());
    running_[name] = true;
    lock.unlock();
    if (!next->supported()) {
      lock.lock();
      running_[name] = false;
      next_due_[name] = SteadyClock::now() + std::max(next->interval(), std::chrono::seconds(60));
      continue;
    }
    CheckResult r;
    try {
      r = next->check();
    } catch (const std::exception& e) {
      // Components return errors as values; this only guards against a third-party throw.
      r = single_state(name, Health::kUnhealthy, std::string("check failed: ") + e.what());
    }
    lock.lock();
    last_[name] = std::move(r);
    running_[name] = false;
    auto interval = next->interval();
    if (interval.count() > 0)
      next_due_[name] = SteadyClock::now() + interval;
    else
      next_due_.erase(name);
    cv_.notify_all();  // another worker may be waiting with no candidate
  }
}

std::vector<HealthState> Scheduler::last_states(const Component& c) const {
  std::lock_guard lock(mu_);
  auto it = last_.find(c.name());
  if (it != last_.end()) return it->second.states;
  HealthState s;
  s.time = Clock::now();
  s.component = std::string(c.name());
  s.name = std::string(c.name());
  s.health = Health::kInitializing;
  s.reason = "no data yet";
  return {s};
}

void Scheduler::store_result(const Component& c, CheckResult r) {
  std::lock_guard lock(mu_);
  last_[std::string(c.name())] = std::move(r);
}

CheckResult Scheduler::run_now(Component& c) {
  CheckResult r = c.check();
  store_result(c, r);
  return r;
}

void Scheduler::trigger(std::string_view name) {
  {
    std::lock_guard lock(mu_);
    if (registry_.find(name) == nullptr) return;
    next_due_[std::string(name)] = SteadyClock::now();
  }
  cv_.notify_all();
}

}  // namespace gpud
