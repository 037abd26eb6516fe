#include "components/host/nfs.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cerrno>
#include <map>

#include "components/kernel_log_support.h"
#include "core/reboot_rules.h"
#include "host/mountinfo.h"
#include "host/nfs_probe.h"
#include "host/os_info.h"

namespace gpud::components {

namespace {

bool injected(const Event& e) { return kmsg::marked_injected(e.extra_info); }
std::string injected_note(bool any) { return any ? " (injected)" : ""; }

}  // namespace

KernelLogVerdict evaluate_nfs(const std::vector<Event>& events,
                              const std::vector<TimePoint>& reboots, TimePoint now) {
  TimePoint last_reboot{};
  for (TimePoint r : reboots) last_reboot = std::max(last_reboot, r);
  // Oldest first; an "OK" in the same second as "not responding" comes after it (and answers it).
  std::vector<const Event*> sorted;
  for (const Event& e : events) sorted.push_back(&e);
  std::stable_sort(sorted.begin(), sorted.end(), [](const Event* a, const Event* b) {
    const bool a_ok = a->name == "nfs_server_ok", b_ok = b->name == "nfs_server_ok";
    return a->time != b->time ? a->time < b->time : !a_ok && b_ok;
  });
  // Per server, the "not responding" lines since its latest "OK".
  struct Outage {
    TimePoint first{};
    int count = 0;
    bool injected = false;
  };
  std::map<std::string, Outage> outages;
  int lock_failures = 0, writeback = 0;
  bool lock_injected = false, writeback_injected = false;
  std::vector<TimePoint> failures;
  for (const Event* e : sorted) {
    const bool hang_kind = e->name == "nfs_lock_reclaim_failed" ||
                           e->name == "nfs_server_not_responding" ||
                           e->name == "nfs_writeback_hang";
    if (hang_kind) failures.push_back(e->time);
    if (e->time <= last_reboot) continue;
    const std::string server = e->extra_info.value("server", std::string());
    if (e->name == "nfs_lock_reclaim_failed") {
      ++lock_failures;
      lock_injected |= injected(*e);
    }
    if (e->name == "nfs_writeback_hang") {
      ++writeback;
      writeback_injected |= injected(*e);
    }
    if (e->name == "nfs_server_not_responding") {
      Outage& o = outages[server];
      if (o.count++ == 0) o.first = e->time;
      o.injected |= injected(*e);
    }
    if (e->name == "nfs_server_ok") outages.erase(server);
  }
  std::vector<std::string> hangs, waiting;
  if (lock_failures > 0)
    hangs.push_back(
        fmt::format("{} lock reclaim failures{}", lock_failures, injected_note(lock_injected)));
  for (const auto& [server, o] : outages) {
    const auto waited = std::chrono::duration_cast<std::chrono::seconds>(now - o.first);
    if (o.count >= 2)
      hangs.push_back(fmt::format("server {} not responding ({} times, no OK){}", server, o.count,
                                  injected_note(o.injected)));
    else if (waited >= kNfsOkWithin)
      hangs.push_back(fmt::format("server {} not responding, no OK within {} minutes{}", server,
                                  kNfsOkWithin.count(), injected_note(o.injected)));
    else
      waiting.push_back(fmt::format("server {} not responding for {}s, no OK yet{}", server,
                                    std::max<int64_t>(waited.count(), 0),
                                    injected_note(o.injected)));
  }
  if (writeback >= 2)
    hangs.push_back(fmt::format("{} writeback hang stack traces{}", writeback,
                                injected_note(writeback_injected)));
  KernelLogVerdict v;
  if (hangs.empty() && waiting.empty()) return v;
  if (hangs.empty()) {
    v.health = Health::kDegraded;
    v.reason = fmt::format("NFS server not responding: {}", fmt::join(waiting, "; "));
    return v;
  }
  hangs.insert(hangs.end(), waiting.begin(), waiting.end());
  auto action = evaluate_suggested_actions(reboots, failures);
  v.health = Health::kUnhealthy;
  v.reason = fmt::format("NFS hang detected: {}", fmt::join(hangs, "; "));
  v.actions = SuggestedActions{"NFS hang requires immediate reboot; drain may hang on NFS volumes",
                               {action.value_or(RepairAction::kRebootSystem)}};
  return v;
}

CheckResult NfsComponent::check() {
  const TimePoint now = Clock::now();
  const TimePoint since = ctx().scan_mode ? TimePoint{} : now - std::chrono::hours(72);
  auto h = kernel_log_history(ctx(), name(), since);
  KernelLogVerdict v = h ? evaluate_nfs(h->events, h->reboots, now) : unreadable_history(h.error());
  if (!config().nfs_checkers.empty()) {
    const std::string& root =
        config().nfs_host_root.empty() ? config().host_root : config().nfs_host_root;
    NfsProbeVerdict p = probe_nfs_volumes(host::HostFs(root), config().nfs_checkers);
    if (!p.problems.empty()) {
      v.health = worst(v.health, Health::kDegraded);
      v.reason += "; " + fmt::format("{}", fmt::join(p.problems, "; "));
    } else {
      v.reason += "; " + fmt::format("{}", fmt::join(p.passed, "; "));
    }
  }
  return single_state(name(), v.health, v.reason, v.actions, nullptr, now);
}

NfsProbeVerdict probe_nfs_volumes(const host::HostFs& fs,
                                  const std::vector<Config::NfsChecker>& checkers) {
  NfsProbeVerdict out;
  auto text = fs.read("/proc/self/mountinfo");
  host::MountTable table;
  if (text) table = host::parse_mountinfo(*text);
  const std::string machine_id = host::read_machine_id(fs);
  for (const auto& c : checkers) {
    if (text) {
      const host::MountInfo* m = host::containing_mount(table, c.volume_path);
      if (m == nullptr || !host::network_fs_type(m->fs_type)) {
        out.problems.push_back(fmt::format(
            "NFS check of {} skipped: it is on {}, not NFS (or Lustre, WekaFS, "
            "virtiofs)",
            c.volume_path, m == nullptr ? "no mount" : m->fs_type + " " + m->mount_point));
        continue;
      }
    }
    auto r = host::run_nfs_probe(fs, c, machine_id);
    if (!r && r.error().code == ETIMEDOUT)
      out.problems.push_back(
          fmt::format("NFS check timed out for {} - server may be unresponsive ({})", c.volume_path,
                      r.error().message));
    else if (!r)
      out.problems.push_back(
          fmt::format("NFS check of {} failed: {}", c.volume_path, r.error().message));
    else
      out.passed.push_back(fmt::format("NFS check ok on {} ({} member file(s) read)", c.volume_path,
                                       r->members.size()));
  }
  return out;
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
