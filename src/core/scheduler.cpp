#include "core/scheduler.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <deque>

#include "core/log.h"
#include "core/time_util.h"

namespace gpud {

using SteadyClock = std::chrono::steady_clock;
// The due time of a triggered check: earlier than any check merely due.
constexpr SteadyClock::time_point kTriggeredDue{};

namespace {

// A component's state before its first check has finished.
HealthState not_checked_yet(std::string_view component) {
  HealthState s;
  s.time = Clock::now();
  s.component = std::string(component);
  s.name = std::string(component);
  s.health = Health::kInitializing;
  s.reason = "no data yet";
  return s;
}
void log_transition(std::string_view component, const HealthTransition& t);
}  // namespace

Scheduler::Scheduler(Registry& registry, size_t workers, MetricRegistry* metrics)
    : registry_(registry), worker_count_(workers == 0 ? 1 : workers), metrics_(metrics) {
  if (metrics_ != nullptr)
    metrics_->describe(kComponentHealthMetric,
                       "Health of each supported component: 1 for its current health value "
                       "(Healthy, Degraded, Unhealthy, Initializing), 0 for the others");
  if (metrics_ != nullptr)
    metrics_->describe(kSuggestedActionMetric,
                       "Repair actions suggested by each component's latest check in a Degraded "
                       "or Unhealthy state (REBOOT_SYSTEM, HARDWARE_INSPECTION, ...): 1 each");
  if (metrics_ != nullptr)
    metrics_->describe(kLastSuccessMetric,
                       "Unix time of each component's latest check that read its sources "
                       "without an error (a value older than two intervals is stale)");
}

void Scheduler::publish_success(std::string_view component, const CheckResult& result) {
  if (metrics_ == nullptr || !check_succeeded(result)) return;
  metrics_->set("", kLastSuccessMetric, static_cast<double>(to_unix_ms(Clock::now())) / 1000.0,
                {{"component", std::string(component)}});
}

namespace {
constexpr Health kAllHealth[] = {Health::kHealthy, Health::kDegraded, Health::kUnhealthy,
                                 Health::kInitializing};
}  // namespace

void Scheduler::publish_health(std::string_view component, Health health) {
  if (metrics_ == nullptr) return;
  // The zeros first: a scrape in between may miss the component's 1, but never sees two 1s.
  Labels labels{{"component", std::string(component)}, {"health", ""}};
  for (Health h : kAllHealth) {
    if (h == health) continue;
    labels["health"] = std::string(to_string(h));
    metrics_->set("", kComponentHealthMetric, 0, labels);
  }
  labels["health"] = std::string(to_string(health));
  metrics_->set("", kComponentHealthMetric, 1, labels);
  published_.insert(std::string(component));
}

void Scheduler::publish_actions(std::string_view component, const CheckResult* result) {
  if (metrics_ == nullptr) return;
  std::set<std::string> actions;
  if (result != nullptr)
    for (const HealthState& s : result->states) {
      if (s.health != Health::kDegraded && s.health != Health::kUnhealthy) continue;
      if (!s.suggested_actions) continue;
      for (RepairAction a : s.suggested_actions->repair_actions)
        actions.insert(std::string(to_string(a)));
    }
  auto it = actions_.find(component);
  if (it == actions_.end() ? actions.empty() : it->second == actions) return;  // unchanged
  const bool removes_some =
      it != actions_.end() &&
      !std::includes(actions.begin(), actions.end(), it->second.begin(), it->second.end());
  if (actions.empty())
    actions_.erase(it);
  else
    actions_[std::string(component)] = actions;
  if (!removes_some) {  // only additions: no series goes away
    for (const std::string& a : actions)
      metrics_->set("", kSuggestedActionMetric, 1,
                    {{"component", std::string(component)}, {"action", a}});
    return;
  }
  // The registry drops whole families only (actions change rarely: when a component turns healthy
  // or its fault escalates).
  metrics_->clear_series("", kSuggestedActionMetric);
  for (const auto& [name, set] : actions_)
    for (const std::string& a : set)
      metrics_->set("", kSuggestedActionMetric, 1, {{"component", name}, {"action", a}});
}

void Scheduler::unpublish_health(std::string_view component) {
  if (metrics_ == nullptr) return;
  publish_actions(component, nullptr);
  auto it = published_.find(component);
  if (it == published_.end()) return;
  published_.erase(it);
  // The registry drops whole families only: drop it and publish the others again (rare: a
  // component is hidden once, when a check finds it does not apply).
  metrics_->clear_series("", kComponentHealthMetric);
  for (const std::string& name : published_) {
    auto last = last_.find(name);
    publish_health(name, last != last_.end() ? last->second.health() : Health::kInitializing);
  }
}

Scheduler::~Scheduler() { stop(); }

void Scheduler::start(std::vector<std::string> first, std::chrono::milliseconds first_wait) {
  std::lock_guard lock(mu_);
  if (!threads_.empty()) return;
  stopping_ = false;
  auto now = SteadyClock::now();
  first_pending_.clear();
  for (std::string& name : first) {
    Component* c = registry_.find(name);
    if (c != nullptr && c->scheduled()) first_pending_.insert(std::move(name));
  }
  first_until_ = now + first_wait;
  // Unsupported components are scheduled too: one may become supported later (NVML loads after
  // start).
  for (Component* c : registry_.all()) {
    if (c->scheduled()) next_due_[std::string(c->name())] = now;
    // A component checked before (run_now) keeps its health; the others wait for their first.
    if (c->supported() && !last_.contains(c->name()))
      publish_health(c->name(), Health::kInitializing);
  }
  for (size_t i = 0; i < worker_count_; ++i) threads_.emplace_back([this] { worker_loop(); });
}

bool Scheduler::wait_first_checks(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  auto until = std::min(first_until_, SteadyClock::now() + timeout);
  return cv_.wait_until(lock, until, [this] { return first_pending_.empty() || stopping_; }) &&
         first_pending_.empty();
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
    // While the first components' first checks run, the others' first checks wait (up to
    // first_until_); a worker with nothing else to run waits for one of them to finish.
    const bool others_wait = !first_pending_.empty() && SteadyClock::now() < first_until_;
    for (auto it = next_due_.begin(); it != next_due_.end();) {
      if (running_[it->first] || it->second >= earliest ||
          (others_wait && !first_pending_.contains(it->first) && !last_.contains(it->first))) {
        ++it;
        continue;
      }
      Component* c = registry_.find(it->first);
      if (c == nullptr) {  // deregistered
        it = next_due_.erase(it);
        continue;
      }
      earliest = it->second;
      next = c;
      ++it;
    }
    auto now = SteadyClock::now();
    if (next == nullptr || earliest > now) {
      if (others_wait) earliest = std::min(earliest, first_until_);
      if (earliest == SteadyClock::time_point::max())
        cv_.wait(lock);
      else
        cv_.wait_until(lock, earliest);
      continue;
    }
    std::string name(next->name());
    running_[name] = true;
    triggered_while_running_.erase(name);  // this check sees what triggered it
    lock.unlock();
    if (!next->supported()) {
      lock.lock();
      unpublish_health(name);
      running_[name] = false;
      next_due_[name] =
          triggered_while_running_.erase(name) > 0
              ? kTriggeredDue
              : SteadyClock::now() + std::max(next->interval(), std::chrono::seconds(60));
      if (first_pending_.erase(name) > 0) cv_.notify_all();
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
    first_pending_.erase(name);
    if (registry_.find(name) != next) {  // deregistered while it ran: its result is dropped
      running_.erase(name);
      triggered_while_running_.erase(name);
      cv_.notify_all();
      continue;
    }
    // A check may find the component not applicable (e.g. a GPU without row remapping): hidden.
    std::optional<HealthTransition> transition;
    if (next->supported()) {
      publish_health(name, r.health());
      publish_actions(name, &r);
      publish_success(name, r);
      transition = cache_locked(name, std::move(r));
    } else {
      unpublish_health(name);
      last_[name] = std::move(r);
      ++generation_;
    }
    running_[name] = false;
    auto interval = next->interval();
    // A trigger that came while the check ran (a kernel-log line stored after the check read the
    // store) is a check again now, not at the next interval.
    if (triggered_while_running_.erase(name) > 0)
      next_due_[name] = kTriggeredDue;
    else if (interval.count() > 0)
      next_due_[name] = SteadyClock::now() + interval;
    else
      next_due_.erase(name);
    cv_.notify_all();  // another worker may be waiting with no candidate
    if (transition) {
      lock.unlock();
      log_transition(name, *transition);
      lock.lock();
    }
  }
}

std::vector<HealthState> Scheduler::last_states(const Component& c) const {
  std::lock_guard lock(mu_);
  auto it = last_.find(c.name());
  if (it != last_.end()) return it->second.states;
  return {not_checked_yet(c.name())};
}

void Scheduler::read_last_states(
    const std::vector<Component*>& components,
    const std::function<void(const std::vector<const HealthState*>&)>& read) const {
  std::deque<HealthState> placeholders;  // stable addresses
  std::vector<const HealthState*> states;
  std::lock_guard lock(mu_);
  for (const Component* c : components) {
    auto it = last_.find(c->name());
    if (it == last_.end()) {
      states.push_back(&placeholders.emplace_back(not_checked_yet(c->name())));
      continue;
    }
    for (const HealthState& s : it->second.states) states.push_back(&s);
  }
  read(states);
}

void Scheduler::store_result(const Component& c, CheckResult r) {
  std::optional<HealthTransition> transition;
  {
    std::lock_guard lock(mu_);
    if (registry_.find(c.name()) != &c) return;  // deregistered meanwhile
    if (c.supported()) {
      publish_health(c.name(), r.health());
      publish_actions(c.name(), &r);
      publish_success(c.name(), r);
      transition = cache_locked(std::string(c.name()), std::move(r));
    } else {
      unpublish_health(c.name());
      last_[std::string(c.name())] = std::move(r);
      ++generation_;
    }
  }
  if (transition) log_transition(c.name(), *transition);
}

std::optional<HealthTransition> Scheduler::cache_locked(const std::string& name, CheckResult r) {
  auto it = last_.find(name);
  auto transition = health_transition(name, it == last_.end() ? nullptr : &it->second, r);
  last_[name] = std::move(r);
  ++generation_;
  return transition;
}

namespace {

// The reasons and actions of a result's states of health `h`.
struct Said {
  std::string reasons;
  std::vector<std::string> actions;
};
Said said_at(const CheckResult& r, Health h) {
  Said out;
  for (const HealthState& s : r.states) {
    if (s.health != h) continue;
    if (!s.reason.empty()) out.reasons += (out.reasons.empty() ? "" : "; ") + s.reason;
    if (s.suggested_actions)
      for (RepairAction a : s.suggested_actions->repair_actions)
        if (std::find(out.actions.begin(), out.actions.end(), to_string(a)) == out.actions.end())
          out.actions.emplace_back(to_string(a));
  }
  return out;
}

// `text` with every run of digits as one '#': "down 4m10s" and "down 5m0s" read the same.
std::string digits_as_one(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  bool in_digits = false;
  for (char c : text) {
    const bool digit = c >= '0' && c <= '9';
    if (!digit || !in_digits) out.push_back(digit ? '#' : c);
    in_digits = digit;
  }
  return out;
}

}  // namespace

std::optional<HealthTransition> health_transition(std::string_view component,
                                                  const CheckResult* previous,
                                                  const CheckResult& current) {
  HealthTransition t;
  t.from = previous != nullptr ? previous->health() : Health::kInitializing;
  t.to = current.health();
  if (t.to == Health::kInitializing) return std::nullopt;
  if (t.from == Health::kInitializing && t.to == Health::kHealthy) return std::nullopt;
  const Said now = said_at(current, t.to);
  if (t.to == t.from) {
    if (!t.warning()) return std::nullopt;
    const Said before = said_at(*previous, t.from);
    if (before.actions == now.actions &&
        digits_as_one(before.reasons) == digits_as_one(now.reasons))
      return std::nullopt;
    t.line =
        fmt::format("component {}: still {}, now: {}", component, to_string(t.to), now.reasons);
    if (!now.actions.empty())
      t.line += fmt::format(" (suggested: {})", fmt::join(now.actions, ", "));
    return t;
  }
  const std::string& reasons = now.reasons;
  const std::vector<std::string>& actions = now.actions;
  t.line = fmt::format("component {}: {} -> {}", component, to_string(t.from), to_string(t.to));
  if (!reasons.empty()) t.line += ": " + reasons;
  if (!actions.empty()) t.line += fmt::format(" (suggested: {})", fmt::join(actions, ", "));
  return t;
}

namespace {
void log_transition(std::string_view component, const HealthTransition& t) {
  if (t.warning())
    logger(component)->warn("{}", t.line);
  else
    logger(component)->info("{}", t.line);
}
}  // namespace

CheckResult Scheduler::run_now(Component& c) {
  const std::string name(c.name());
  {
    // One check of a component at a time: a scheduled one finishes first.
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return !running_[name]; });
    running_[name] = true;
  }
  CheckResult r;
  try {
    r = c.check();
  } catch (const std::exception& e) {
    r = single_state(name, Health::kUnhealthy, std::string("check failed: ") + e.what());
  }
  store_result(c, r);
  {
    std::lock_guard lock(mu_);
    running_[name] = false;
    // A trigger meanwhile left the component due at once (kTriggeredDue): a worker checks it.
    triggered_while_running_.erase(name);
  }
  cv_.notify_all();
  return r;
}

Result<void> Scheduler::deregister(std::string_view name) {
  Component* c = registry_.find(name);
  if (c == nullptr) return make_error("component not found: " + std::string(name), 404);
  if (!c->can_deregister())
    return make_error("component " + std::string(name) +
                          " is built in and cannot be deregistered (only custom plugins can)",
                      400);
  {
    std::lock_guard lock(mu_);
    // Under mu_, so that no worker picks it between its removal from the registry and from the
    // schedule.
    if (auto r = registry_.retire(name); !r) return r;
    next_due_.erase(std::string(name));
    last_.erase(std::string(name));
    ++generation_;
    unpublish_health(name);
    if (metrics_ != nullptr)
      metrics_->remove("", kLastSuccessMetric, {{"component", std::string(name)}});
    if (auto it = running_.find(name); it != running_.end() && !it->second) running_.erase(it);
  }
  cv_.notify_all();
  c->deregistered();
  logger("scheduler")->info("component {} deregistered", name);
  return {};
}

void Scheduler::trigger(std::string_view name) {
  {
    std::lock_guard lock(mu_);
    if (registry_.find(name) == nullptr) return;
    // Before every check that is merely due: a triggered check answers an event (a kernel-log
    // line, set-healthy), and waits for no periodic one.
    next_due_[std::string(name)] = kTriggeredDue;
    if (auto it = running_.find(name); it != running_.end() && it->second)
      triggered_while_running_.insert(std::string(name));
  }
  cv_.notify_all();
}

}  // namespace gpud
