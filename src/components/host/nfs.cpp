#include "components/host/nfs.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>

#include "components/kernel_log_support.h"
#include "core/reboot_rules.h"

namespace gpud::components {

KernelLogVerdict evaluate_nfs(const std::vector<Event>& events,
                              const std::vector<TimePoint>& reboots) {
  TimePoint last_reboot{};
  for (TimePoint r : reboots) last_reboot = std::max(last_reboot, r);
  std::vector<std::string> findings;
  std::map<std::string, TimePoint> not_responding, ok;
  int lock_failures = 0, writeback = 0;
  std::vector<TimePoint> failures;
  for (const Event& e : events) {
    const bool hang_kind = e.name == "nfs_lock_reclaim_failed" ||
                           e.name == "nfs_server_not_responding" || e.name == "nfs_writeback_hang";
    if (hang_kind) failures.push_back(e.time);
    if (e.time <= last_reboot) continue;
    const std::string server = e.extra_info.value("server", std::string());
    if (e.name == "nfs_lock_reclaim_failed") ++lock_failures;
    if (e.name == "nfs_writeback_hang") ++writeback;
    if (e.name == "nfs_server_not_responding")
      not_responding[server] = std::max(not_responding[server], e.time);
    if (e.name == "nfs_server_ok") ok[server] = std::max(ok[server], e.time);
  }
  if (lock_failures > 0) findings.push_back(fmt::format("{} lock reclaim failures", lock_failures));
  for (const auto& [server, t] : not_responding) {
    auto it = ok.find(server);
    if (it == ok.end() || it->second < t)
      findings.push_back(fmt::format("server {} not responding", server));
  }
  if (writeback >= 2) findings.push_back(fmt::format("{} writeback hang stack traces", writeback));
  KernelLogVerdict v;
  if (findings.empty()) return v;
  auto action = evaluate_suggested_actions(reboots, failures);
  v.health = Health::kUnhealthy;
  v.reason = fmt::format("NFS hang detected: {}", fmt::join(findings, "; "));
  v.actions = SuggestedActions{"NFS hang requires immediate reboot; drain may hang on NFS volumes",
                               {action.value_or(RepairAction::kRebootSystem)}};
  return v;
}

CheckResult NfsComponent::check() {
  const TimePoint now = Clock::now();
  const TimePoint since = ctx().scan_mode ? TimePoint{} : now - std::chrono::hours(72);
  std::vector<Event> events;
  if (auto ev = this->events(since, TimePoint::max()); ev) events = std::move(*ev);
  auto reboots = ctx().scan_mode ? std::vector<TimePoint>{} : reboot_times(ctx().events, since);
  KernelLogVerdict v = evaluate_nfs(events, reboots);
  return single_state(name(), v.health, v.reason, v.actions, {}, now);
}

}  // namespace gpud::components
