// Scheduler: runs each component's check() on its interval on a small worker pool, caches the
// last result and publishes each component's health (gpud_component_health) and suggested repair
// actions (gpud_component_suggested_action) as gauges.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "core/metrics.h"
#include "core/registry.h"

namespace gpud {

// The gauge family the scheduler keeps: gpud_component_health{component,health}, one series per
// health value, 1 for the component's current health and 0 for the others.
inline constexpr std::string_view kComponentHealthMetric = "gpud_component_health";
// Unix time of each component's latest check that read its sources without an error.
inline constexpr std::string_view kLastSuccessMetric =
    "gpud_component_last_success_timestamp_seconds";
// gpud_component_suggested_action{component,action}: 1 for each repair action the component's
// latest check suggests in a Degraded or Unhealthy state; no series for a component suggesting
// none. Alert rules join it to name the action (deploy/prometheus/gpud-alerts.yml).
inline constexpr std::string_view kSuggestedActionMetric = "gpud_component_suggested_action";

// The line a change of a component's health is logged with, or nullopt when it is not logged:
// "<component>: Healthy -> Unhealthy: <reason> (suggested: REBOOT_SYSTEM)", the reasons and actions
// being those of the worst states. A component's first result is logged only when it is not Healthy
// (start-up is not a transition); Initializing results are not transitions either. A Degraded or
// Unhealthy component whose reasons or actions change at the same health is logged too
// ("<component>: still Unhealthy, now: <reasons>"): a second GPU failing, another fault. Numbers
// alone changing (a duration, a count, a temperature) is not a change: the reasons are compared
// with every run of digits read as one.
struct HealthTransition {
  Health from = Health::kInitializing;
  Health to = Health::kInitializing;
  std::string line;
  bool warning() const { return to == Health::kDegraded || to == Health::kUnhealthy; }
};
std::optional<HealthTransition> health_transition(std::string_view component,
                                                  const CheckResult* previous,
                                                  const CheckResult& current);

class Scheduler {
 public:
  // With metrics, every supported component's health is published as kComponentHealthMetric
  // (Initializing at start(), then the worst state of each check result as it lands), and its
  // suggested repair actions as kSuggestedActionMetric.
  explicit Scheduler(Registry& registry, size_t workers = 2, MetricRegistry* metrics = nullptr);
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Checks every supported component once right away, then each on its interval. The components
  // named in `first` (those others' checks read from, e.g. the container runtimes a GPU process is
  // traced through) have their first check before any other component's first check, for as long
  // as `first_wait` after start(); a name not registered is ignored.
  void start(std::vector<std::string> first = {},
             std::chrono::milliseconds first_wait = std::chrono::seconds(10));
  // Waits until the first checks of start()'s `first` components have finished (or found them
  // unsupported), or until the deadline start() set or `timeout` passes; true when they finished.
  bool wait_first_checks(std::chrono::milliseconds timeout);
  void stop();  // bounded: waits for running checks to finish

  // The cached states; one Initializing "no data yet" state before the first check finished.
  std::vector<HealthState> last_states(const Component& c) const;
  // Calls `read` once with the cached states of each of `components`, in that order (last_states'
  // placeholder for one not checked yet), without copying them: under the scheduler's lock, so
  // `read` must not call the scheduler. For a reader that judges every component's states at once
  // (the per-GPU health each scrape refreshes), where copying them (their per-GPU data rows) cost
  // more memory and time than the judging.
  void read_last_states(
      const std::vector<Component*>& components,
      const std::function<void(const std::vector<const HealthState*>&)>& read) const;
  // Changes whenever a cached result does (stored, replaced or dropped): an answer built from
  // last_states() stays the same while this does, so the API can serve it again.
  uint64_t generation() const { return generation_.load(std::memory_order_acquire); }
  // Runs the check now on the caller's thread (after a scheduled check of the same component
  // finishes) and caches the result.
  CheckResult run_now(Component& c);
  // Schedules an immediate re-check (e.g. after set-healthy or a new kernel message), ahead of the
  // checks that are merely due; one triggered while the component's check runs follows it.
  void trigger(std::string_view name);
  // Removes a component that can_deregister() (a custom plugin) from the registry and the
  // schedule, drops its cached state and health series, and tells it (deregistered()). A check of
  // it running now finishes on a component that stays alive, and its result is dropped. Errors:
  // 404 not found, 400 a built-in component.
  [[nodiscard]] Result<void> deregister(std::string_view name);

 private:
  void worker_loop();
  void store_result(const Component& c, CheckResult r);
  // Caches the result (mu_ held) and returns the health change to log once mu_ is released.
  std::optional<HealthTransition> cache_locked(const std::string& name, CheckResult r);
  // Called with mu_ held, so that results landing together publish in the order they are cached.
  void publish_health(std::string_view component, Health health);
  void unpublish_health(std::string_view component);  // hidden components have no series
  // Called with mu_ held; nullptr (or a hidden component) removes the component's actions.
  void publish_actions(std::string_view component, const CheckResult* result);
  // kLastSuccessMetric, when `result` succeeded (check_succeeded).
  void publish_success(std::string_view component, const CheckResult& result);

  Registry& registry_;
  size_t worker_count_;
  MetricRegistry* metrics_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::map<std::string, std::chrono::steady_clock::time_point, std::less<>> next_due_;
  // start()'s `first` components whose first check has not finished, and until when the others
  // wait for them.
  std::set<std::string, std::less<>> first_pending_;
  std::chrono::steady_clock::time_point first_until_{};
  std::map<std::string, bool, std::less<>> running_;
  // Components triggered while their check ran: checked again as soon as it ends.
  std::set<std::string, std::less<>> triggered_while_running_;
  std::map<std::string, CheckResult, std::less<>> last_;
  std::atomic<uint64_t> generation_{0};           // bumped with every change of last_ (mu_ held)
  std::set<std::string, std::less<>> published_;  // components with gpud_component_health series
  // Components with gpud_component_suggested_action series, and their actions.
  std::map<std::string, std::set<std::string>, std::less<>> actions_;
  std::vector<std::thread> threads_;
};

}  // namespace gpud
