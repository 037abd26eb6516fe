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
  auto h = kernel_log_history(ctx(), name(), since);
  KernelLogVerdict v = h ? evaluate_nfs(h->events, h->reboots) : unreadable_history(h.error());
  return single_state(name(), v.health, v.reason, v.actions, {}, now);
}

kmsg::ComponentRules nfs_kernel_log_rules() {
  kmsg::ComponentRules r;
  r.component = "nfs";
  r.lines = {
      kmsg::pattern_rule({{"nfs: server"}}, "nfs_server_not_responding",
                         R"(nfs: server ([^ ]+) not responding)", "NFS server {} not responding",
                         "server"),
      kmsg::pattern_rule({{"nfs: server"}}, "nfs_server_ok", R"(nfs: server ([^ ]+) OK)",
                         "NFS server {} OK", "server"),
      kmsg::pattern_rule({{"Lock reclaim failed", "reclai"}}, "nfs_lock_reclaim_failed",
                         R"(nfs4_reclaim_open_state: Lock reclaim failed)",
                         "NFS lock reclaim failed"),
      kmsg::pattern_rule(
          {{"nfs_lock_and_join_requests+"},
           {"nfs_wb_all+"},
           {"nfs_page_async_flush+"},
           {"nfs_writepages_callback+"}},
          "nfs_writeback_hang",
          R"((?:^|\s)(nfs_lock_and_join_requests|nfs_wb_all|nfs_page_async_flush|nfs_writepages_callback)\+0x[0-9a-f]+)",
          "NFS writeback hang suspected ({})", "function"),
  };
  return r;
}

}  // namespace gpud::components
