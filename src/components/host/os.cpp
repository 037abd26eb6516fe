#include "components/host/os.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <re2/re2.h>

#include <algorithm>

#include "components/host/pstore.h"
#include "components/kernel_log_support.h"
#include "components/snapshot_metric.h"
#include "core/log.h"
#include "core/time_util.h"
#include "kmsg/parser.h"

namespace gpud::components {
namespace {

constexpr std::string_view kName = "os";
constexpr std::string_view kRebootEvent = "reboot";
constexpr std::string_view kBlockedPersistentEvent = "blocked_processes_persistent";
constexpr std::string_view kBlockedRecoveredEvent = "blocked_processes_recovered";
constexpr std::string_view kLeakDescription =
    "check/restart user applications for leaky file descriptors";

struct Finding {
  Health health;
  std::string reason;
  std::optional<SuggestedActions> actions;
};

double percent(int64_t used, int64_t limit) {
  return limit > 0 ? 100.0 * static_cast<double>(used) / static_cast<double>(limit) : 0.0;
}

SuggestedActions leak_action() {
  return {std::string(kLeakDescription), {RepairAction::kCheckUserAppAndGpu}};
}

void usage_rule(std::vector<Finding>& out, std::string_view what, int64_t used, int64_t limit,
                const OsThresholds& t) {
  if (limit <= 0) return;
  double pct = percent(used, limit);
  Health h = pct > t.unhealthy_percent  ? Health::kUnhealthy
             : pct > t.degraded_percent ? Health::kDegraded
                                        : Health::kHealthy;
  if (h == Health::kHealthy) return;
  out.push_back(
      {h, fmt::format("too many {}: {} of {} ({:.1f}%)", what, used, limit, pct), leak_action()});
}

bool escalates(const BlockedProcess& p, const std::vector<std::string>& patterns) {
  for (const auto& pattern : patterns) {
    RE2 re(pattern, RE2::Quiet);
    if (re.ok() && RE2::PartialMatch(p.comm, re)) return true;
  }
  return false;
}

std::string format_uptime(double seconds) {
  return format_duration(std::chrono::seconds(static_cast<int64_t>(seconds)));
}

}  // namespace

std::vector<BlockedProcess> DStateTracker::update(const std::vector<host::ProcPidStat>& blocked) {
  std::map<std::pair<int64_t, std::string>, int> next;
  std::vector<BlockedProcess> out;
  for (const host::ProcPidStat& p : blocked) {
    auto key = std::make_pair(p.pid, p.comm);
    auto it = streaks_.find(key);
    int checks = (it == streaks_.end() ? 0 : it->second) + 1;
    next[key] = checks;
    out.push_back({p.pid, p.comm, checks});
  }
  streaks_ = std::move(next);
  return out;
}

namespace {

// A value that could not be read is null in the data, not 0.
template <typename T>
nlohmann::json or_null(const std::optional<T>& v) {
  if (!v) return nullptr;
  if constexpr (std::is_floating_point_v<T>) return static_cast<int64_t>(*v);
  return *v;
}

}  // namespace

nlohmann::json to_json(const OsSnapshot& s) {
  nlohmann::json blocked = nlohmann::json::array();
  for (const auto& b : s.persistent_blocked)
    blocked.push_back({{"pid", b.pid}, {"comm", b.comm}, {"checks", b.checks}});
  const host::OsInfo& i = s.info;
  nlohmann::json j = {
      {"kernel_version", i.kernel_version},
      {"os_image", i.os_image},
      {"operating_system", i.operating_system},
      {"hostname", i.hostname},
      {"boot_id", i.boot_id},
      {"machine_id", i.machine_id},
      {"boot_time", i.boot_time ? format_rfc3339(*i.boot_time) : std::string()},
      {"uptime_seconds", or_null(i.uptime_seconds)},
      {"processes", s.processes},
      {"processes_by_state", s.processes_by_state},
      {"zombie_processes", s.zombies},
      {"blocked_processes", s.blocked},
      {"blocked_processes_persistent", std::move(blocked)},
      {"blocked_persistence_checks", s.persistence},
      {"pid_max", or_null(i.pid_max)},
      {"file_handles_allocated", or_null(i.file_handles_allocated)},
      {"file_max", or_null(i.file_max)},
  };
  return j;
}

int64_t pid_threshold(const OsSnapshot& s) { return s.info.pid_max.value_or(0); }

int64_t file_handle_threshold(const OsSnapshot& s, const OsThresholds& t) {
  if (!s.info.file_max || *s.info.file_max <= 0) return 0;
  return std::min(*s.info.file_max, t.file_handles_cap);
}

OsEvaluation evaluate_os(const OsSnapshot& s, const OsThresholds& t) {
  std::vector<Finding> findings;
  if (s.zombies > t.zombies_unhealthy || s.zombies > t.zombies_degraded) {
    bool bad = s.zombies > t.zombies_unhealthy;
    findings.push_back({bad ? Health::kUnhealthy : Health::kDegraded,
                        fmt::format("too many zombie processes: {} (threshold: {})", s.zombies,
                                    bad ? t.zombies_unhealthy : t.zombies_degraded),
                        leak_action()});
  }
  if (!s.persistent_blocked.empty()) {
    std::vector<std::string> names;
    bool hung = false;
    for (const auto& b : s.persistent_blocked) {
      names.push_back(fmt::format("{}({})", b.comm, b.pid));
      hung = hung || escalates(b, t.escalate_names);
    }
    std::string reason =
        fmt::format("{} processes blocked in D state for {} checks: {}",
                    s.persistent_blocked.size(), s.persistence, fmt::join(names, ", "));
    if (hung) {
      findings.push_back({Health::kUnhealthy, std::move(reason),
                          SuggestedActions{"NVIDIA processes are stuck in uninterruptible sleep "
                                           "(likely a hung driver); reboot the system",
                                           {RepairAction::kRebootSystem}}});
    } else {
      findings.push_back({Health::kDegraded, std::move(reason), std::nullopt});
    }
  }
  usage_rule(findings, "running PIDs", s.processes, pid_threshold(s), t);
  usage_rule(findings, "allocated file handles", s.info.file_handles_allocated.value_or(0),
             file_handle_threshold(s, t), t);

  OsEvaluation ev;
  if (findings.empty()) {
    ev.reason = "ok";
    return ev;
  }
  std::stable_sort(findings.begin(), findings.end(), [](const Finding& a, const Finding& b) {
    return severity(a.health) > severity(b.health);
  });
  ev.health = findings.front().health;
  std::vector<std::string> reasons;
  for (const Finding& f : findings) {
    reasons.push_back(f.reason);
    if (f.health != ev.health || !f.actions) continue;
    if (!ev.actions) {
      ev.actions = f.actions;
      continue;
    }
    for (RepairAction a : f.actions->repair_actions)
      if (std::find(ev.actions->repair_actions.begin(), ev.actions->repair_actions.end(), a) ==
          ev.actions->repair_actions.end())
        ev.actions->repair_actions.push_back(a);
  }
  ev.reason = fmt::format("{}", fmt::join(reasons, "; "));
  return ev;
}

bool should_record_reboot(std::optional<TimePoint> last_recorded, TimePoint boot_time) {
  if (!last_recorded) return true;
  return boot_time - *last_recorded > std::chrono::seconds(60);
}

Event make_reboot_event(TimePoint boot_time) {
  Event e;
  e.component = std::string(kName);
  e.time = std::chrono::time_point_cast<std::chrono::seconds>(boot_time);
  e.name = std::string(kRebootEvent);
  e.type = EventType::kWarning;
  e.message = "system reboot detected " + format_rfc3339(e.time);
  return e;
}

namespace {

// What the os metrics read: the check's snapshot and the thresholds it was judged against.
struct OsMetricInput {
  const OsSnapshot& snapshot;
  const OsThresholds& thresholds;
};

std::optional<double> file_handles(const OsMetricInput& in) {
  return metric_value(in.snapshot.info.file_handles_allocated);
}
// file-max, when it was read and is a limit (> 0).
std::optional<int64_t> file_max(const OsMetricInput& in) {
  const auto& max = in.snapshot.info.file_max;
  return max && *max > 0 ? max : std::nullopt;
}
std::optional<double> percent_of(const std::optional<int64_t>& used, int64_t limit) {
  return used && limit > 0 ? std::optional<double>(percent(*used, limit)) : std::nullopt;
}

// What could not be read is absent, not 0 (nor the last value read).
constexpr SnapshotMetric<OsMetricInput> kMetrics[] = {
    {.name = "os_zombie_processes",
     .help = "Number of zombie processes",
     .value = [](const OsMetricInput& in) { return metric_value(in.snapshot.zombies); }},
    {.name = "os_running_pids",
     .help = "Number of processes (PIDs in /proc)",
     .value = [](const OsMetricInput& in) { return metric_value(in.snapshot.processes); }},
    {.name = "os_blocked_processes",
     .help = "Number of processes in uninterruptible sleep (D state)",
     .value = [](const OsMetricInput& in) { return metric_value(in.snapshot.blocked); }},
    {.name = "os_blocked_processes_persistent",
     .help = "Number of processes in D state for the persistence threshold of checks",
     .value =
         [](const OsMetricInput& in) {
           return metric_value(in.snapshot.persistent_blocked.size());
         }},
    {.name = "os_allocated_file_handles",
     .help = "Allocated file handles (/proc/sys/fs/file-nr)",
     .value = file_handles},
    // GPUd's os_allocated_file_handles_percent is of file-max itself, often 2^63-1 and so near 0;
    // the rule judges against file-max capped at file_handles_cap (GPUd's threshold gauges).
    {.name = "os_allocated_file_handles_percent",
     .help = "Allocated file handles as a percentage of file-max",
     .value =
         [](const OsMetricInput& in) {
           return percent_of(in.snapshot.info.file_handles_allocated, file_max(in).value_or(0));
         }},
    {.name = "os_limit",
     .help = "System-wide file handle limit (/proc/sys/fs/file-max)",
     .value = [](const OsMetricInput& in) { return metric_value(file_max(in)); }},
    {.name = "os_threshold_allocated_file_handles",
     .help = "Cap on the file handle limit that allocated file handles are judged against",
     .value = [](const OsMetricInput& in) { return metric_value(in.thresholds.file_handles_cap); }},
    {.name = "os_threshold_allocated_file_handles_percent",
     .help = "Allocated file handles as a percentage of min(file-max, "
             "os_threshold_allocated_file_handles): what the health rule judges",
     .value =
         [](const OsMetricInput& in) {
           return percent_of(in.snapshot.info.file_handles_allocated,
                             file_handle_threshold(in.snapshot, in.thresholds));
         }},
    {.name = "os_threshold_running_pids",
     .help = "PID limit the running PIDs are measured against",
     .value = [](const OsMetricInput& in) { return metric_value(in.snapshot.info.pid_max); }},
    {.name = "os_threshold_running_pids_percent",
     .help = "Running PIDs as a percentage of pid_max",
     .value =
         [](const OsMetricInput& in) {
           return percent_of(in.snapshot.processes, pid_threshold(in.snapshot));
         }},
    {.name = "os_uptime_seconds",
     .help = "Seconds since boot",
     .value = [](const OsMetricInput& in) { return in.snapshot.info.uptime_seconds; }},
};
static_assert(valid_metric_table(kMetrics));

}  // namespace

OsComponent::OsComponent(const ComponentContext& ctx) : Component(ctx), fs_(ctx.config->host_root) {
  thresholds_.persistence = ctx.config->os_blocked_process_persistence > 0
                                ? ctx.config->os_blocked_process_persistence
                            : ctx.scan_mode ? 1
                                            : 5;
  if (ctx.config->os_blocked_process_name_regexes)
    thresholds_.escalate_names = *ctx.config->os_blocked_process_name_regexes;
  describe_metrics(ctx.metrics, kMetrics);
}

void OsComponent::start() {
  // Panics pstore kept across the last reboots (the store drops those it already holds).
  if (ctx().events != nullptr)
    for (Event& e : pstore_panic_events(fs_, Clock::now())) record(std::move(e));
  auto boot = host::read_boot_time(fs_);
  if (!boot) {
    logger("os")->warn("cannot read the boot time; no reboot event recorded");
    return;
  }
  if (ctx().events == nullptr) return;
  std::optional<TimePoint> last;
  auto events = ctx().events->query(kName, TimePoint{}, TimePoint::max());
  if (!events) {
    logger("os")->warn("failed to read reboot events: {}", events.error().message);
  } else {
    for (const Event& e : *events)
      if (e.name == kRebootEvent && (!last || e.time > *last)) last = e.time;
  }
  if (should_record_reboot(last, *boot)) record(make_reboot_event(*boot));
}

CheckResult OsComponent::check() {
  const TimePoint now = Clock::now();
  OsSnapshot snap;
  snap.info = host::read_os_info(fs_, now);
  host::ProcessScan scan = host::scan_processes(fs_);
  snap.processes = static_cast<int64_t>(scan.processes.size());
  snap.zombies = scan.count('Z');
  snap.blocked = scan.count('D');
  for (const auto& [state, n] : scan.counts_by_state)
    snap.processes_by_state[std::string(host::process_state_name(state))] += n;
  std::vector<host::ProcPidStat> in_d;
  for (const auto& p : scan.processes)
    if (p.state == 'D') in_d.push_back(p);

  bool episode_started = false, episode_ended = false;
  {
    std::lock_guard lock(mu_);
    snap.persistence = thresholds_.persistence;
    for (const BlockedProcess& b : tracker_.update(in_d))
      if (b.checks >= thresholds_.persistence) snap.persistent_blocked.push_back(b);
    bool persistent = !snap.persistent_blocked.empty();
    episode_started = persistent && !persistent_episode_;
    episode_ended = !persistent && persistent_episode_;
    persistent_episode_ = persistent;
  }

  OsEvaluation ev = evaluate_os(snap, thresholds_);
  nlohmann::json data = to_json(snap);

  if (episode_started) {
    Event e{std::string(kName),
            std::chrono::time_point_cast<std::chrono::seconds>(now),
            std::string(kBlockedPersistentEvent),
            EventType::kWarning,
            fmt::format("{} processes blocked in D state for {} checks",
                        snap.persistent_blocked.size(), snap.persistence),
            {{"blocked_processes", data["blocked_processes_persistent"].dump()}}};
    record(std::move(e));
  } else if (episode_ended) {
    record(Event{std::string(kName), std::chrono::time_point_cast<std::chrono::seconds>(now),
                 std::string(kBlockedRecoveredEvent), EventType::kInfo,
                 "no processes blocked in D state anymore", nlohmann::json::object()});
  }

  const OsMetricInput metric_input{snap, thresholds_};
  publish_metrics(ctx().metrics, kName, kMetrics, &metric_input);

  CheckResult r = single_state(kName, ev.health, ev.reason, ev.actions, data, now);
  // A network device that cannot be freed needs a reboot; the other kernel-log events (panics,
  // oopses, file-max, transmit timeouts) are listed with health unchanged.
  if (auto h =
          kernel_log_history(ctx(), kName, lookback_start(ctx(), std::chrono::seconds(0), now));
      !h) {
    merge_verdict(r, unreadable_history(h.error()));
  } else {
    KernelLogVerdict v = evaluate_netdev_refcount(h->events, h->reboots);
    if (v.health != Health::kHealthy) merge_verdict(r, v);
  }
  append_kernel_log_events(r, ctx(), kName,
                           {"kernel_panic", "kernel_oops", "vfs_file_max_limit_reached",
                            kNetdevRefcountLeakEvent, kNetdevWatchdogEvent});
  const host::OsInfo& i = snap.info;
  const int64_t pid_limit = pid_threshold(snap);
  const int64_t fd_limit = file_handle_threshold(snap, thresholds_);
  const int64_t fds = i.file_handles_allocated.value_or(0);
  r.detail = fmt::format(
      "kernel: {} ({})\nboot: {} (up {}), boot id {}\nmachine id: {}\n"
      "processes: {} (zombie {}, D-state {}, D-state for {}+ checks {})\n"
      "pids: {} / {} ({:.1f}%)\nfile handles: {} / {} ({:.1f}%)\n",
      i.kernel_version, i.os_image, i.boot_time ? format_rfc3339(*i.boot_time) : "unknown",
      i.uptime_seconds ? format_uptime(*i.uptime_seconds) : "unknown", i.boot_id, i.machine_id,
      snap.processes, snap.zombies, snap.blocked, snap.persistence, snap.persistent_blocked.size(),
      snap.processes, pid_limit, percent(snap.processes, pid_limit), fds, fd_limit,
      percent(fds, fd_limit));
  return r;
}

Result<void> OsComponent::set_healthy(const Acknowledgement& ack) {
  {
    std::lock_guard lock(mu_);
    tracker_.reset();
    persistent_episode_ = false;
  }
  // Reboot events are acknowledged too: their readers (reboot_times) count every reboot.
  return Component::set_healthy(ack);
}

namespace {

// "Kernel panic", then "CPU: 3 PID: 1234 Comm: bash" within 10 lines.
class KernelPanic : public kmsg::LineSequence {
 public:
  std::optional<kmsg::Match> feed(std::string_view s) override {
    if (kmsg::contains(s, "Kernel panic") || kmsg::contains(s, "Kernel Panic")) {
      lines_left_ = 10;
      return std::nullopt;
    }
    if (lines_left_ == 0) return std::nullopt;
    --lines_left_;
    static const RE2 kCpu(R"(CPU: (\d+) PID: (\d+) Comm: (\S+))");
    int cpu = 0;
    long long pid = 0;
    std::string comm;
    if (!kmsg::contains(s, "Comm: ") ||
        !RE2::PartialMatch(re2::StringPiece(s.data(), s.size()), kCpu, &cpu, &pid, &comm))
      return std::nullopt;
    lines_left_ = 0;
    kmsg::Match m;
    m.name = "kernel_panic";
    m.message = kmsg::sanitize_utf8("Kernel panic detected - CPU: " + std::to_string(cpu) +
                                    ", PID: " + std::to_string(pid) + ", Process: " + comm);
    m.extra_info = {{"cpu", cpu}, {"pid", pid}, {"process", kmsg::sanitize_utf8(comm)}};
    return m;
  }
  bool pending() const override { return lines_left_ > 0; }

 private:
  int lines_left_ = 0;
};

// net/sched/sch_generic.c dev_watchdog: a transmit queue stopped longer than the device's
// watchdog_timeo; the driver's ndo_tx_timeout resets it. 2.6.2x "NETDEV WATCHDOG: %s: transmit
// timed out"; 2.6.3x-5.x WARN_ONCE "NETDEV WATCHDOG: %s (%s): transmit queue %u timed out"
// (the netdev, its driver), 5.17+ "... timed out %u ms"; 6.5+ netdev_crit "NETDEV WATCHDOG: CPU:
// %d: transmit queue %u timed out %u ms" after netdev_printk's "<driver> <device> <netdev>: ".
std::optional<kmsg::Match> match_netdev_watchdog(std::string_view s) {
  static const RE2 kOld(std::string(kmsg::kMessageStart) +
                        R"(NETDEV WATCHDOG: (\S+) \(([^)]*)\): transmit queue (\d+) timed out)");
  static const RE2 kOldest(std::string(kmsg::kMessageStart) +
                           R"(NETDEV WATCHDOG: (\S+): transmit timed out)");
  static const RE2 kNew(std::string(kmsg::kMessageStart) +
                        R"((\S+) \S+ (\S+)(?: \([a-z ]+\))?: NETDEV WATCHDOG: CPU: \d+: )"
                        R"(transmit queue (\d+) timed out)");
  const re2::StringPiece in(s.data(), s.size());
  std::string netdev, driver, queue;
  if (!RE2::PartialMatch(in, kOld, &netdev, &driver, &queue) &&
      !RE2::PartialMatch(in, kNew, &driver, &netdev, &queue) &&
      !RE2::PartialMatch(in, kOldest, &netdev))
    return std::nullopt;
  kmsg::Match m;
  m.name = kNetdevWatchdogEvent;
  m.message = kmsg::sanitize_utf8(fmt::format("transmit {}timed out on {}{}",
                                              queue.empty() ? "" : "queue " + queue + " ", netdev,
                                              driver.empty() ? "" : " (" + driver + ")"));
  m.extra_info = {{"log_line", kmsg::log_line_excerpt(s)}, {"netdev", kmsg::sanitize_utf8(netdev)}};
  if (!driver.empty()) m.extra_info["driver"] = kmsg::sanitize_utf8(driver);
  if (!queue.empty()) m.extra_info["queue"] = std::stoi(queue);
  return m;
}

}  // namespace

KernelLogVerdict evaluate_netdev_refcount(const std::vector<Event>& events,
                                          const std::vector<TimePoint>& reboots) {
  const TimePoint last_reboot =
      reboots.empty() ? TimePoint{} : *std::max_element(reboots.begin(), reboots.end());
  const Event* newest = nullptr;
  size_t count = 0;
  for (const Event& e : events) {
    if (e.name != kNetdevRefcountLeakEvent || e.time <= last_reboot) continue;
    ++count;
    if (newest == nullptr || e.time > newest->time) newest = &e;
  }
  KernelLogVerdict v;
  if (newest == nullptr) return v;
  v.health = Health::kDegraded;
  v.reason = fmt::format("{} ({}x since the last reboot)", newest->message, count);
  v.actions = SuggestedActions{
      "a network device's references leaked: it and its network namespace stay until a reboot, "
      "and creating or removing namespaces (pods) may hang",
      {RepairAction::kRebootSystem}};
  return v;
}

kmsg::ComponentRules os_kernel_log_rules() {
  kmsg::ComponentRules r;
  r.component = std::string(kName);
  r.lines = {
      kmsg::pattern_rule({{"file-max limit"}}, "vfs_file_max_limit_reached",
                         R"(VFS: file-max limit (\d+) reached)", "VFS file-max limit reached",
                         "file_max"),
      // The first line of a kernel oops: arch/x86/mm/fault.c (show_fault_oops) before 5.x "BUG:
      // unable to handle kernel NULL pointer dereference|paging request at %p", 5.x+ "BUG: kernel
      // NULL pointer dereference, address: %px" / "BUG: unable to handle page fault for address:
      // %px"; arch/x86/kernel/traps.c die("general protection fault") through dumpstack.c
      // __die_header ("%s: %04lx [#%d]", 5.x+ ", probably for non-canonical address 0x%lx");
      // lib/bug.c report_bug (3.x-6.x) "kernel BUG at %s:%u!". The "Oops: %04lx [#%d]" header
      // that follows a page fault's line is not a second oops, and its 6-byte keyword would
      // halve the prefilter's stride.
      kmsg::pattern_rule(
          {{"BUG: unable to handle", "to handle"},
           {"NULL pointer dereference"},
           {"general protection fault"},
           {"kernel BUG at", "el BUG at"}},
          "kernel_oops",
          std::string(kmsg::kMessageStart) +
              R"((BUG: unable to handle (?:kernel NULL pointer dereference|kernel paging request|page fault for address)|BUG: kernel NULL pointer dereference, address|general protection fault(?:, probably for non-canonical address 0x[0-9a-f]+)?: [0-9a-f]{4} \[#\d+\]|kernel BUG at \S+:\d+!))",
          "kernel oops ({})", "oops"),
      // net/core/dev.c netdev_wait_allrefs (2.6-5.x; netdev_wait_allrefs_any since 5.18):
      // pr_emerg("unregister_netdevice: waiting for %s to become free. Usage count = %d\n"),
      // every 10 s while the device's reference count stays above zero.
      kmsg::pattern_rule(
          {{"to become free. Usage count", "free. Us"}}, kNetdevRefcountLeakEvent,
          std::string(kmsg::kMessageStart) +
              R"(unregister_netdevice: waiting for (\S+) to become free\. Usage count = -?\d+)",
          "network device {} cannot be freed (unregister_netdevice is waiting for its references)",
          "netdev"),
      {{{"NETDEV WATCHDOG", "WATCHDOG"}}, match_netdev_watchdog},
  };
  r.sequences.push_back({{{"Kernel panic", "l pani"}, {"Kernel Panic", "l Pani"}},
                         [] { return std::make_unique<KernelPanic>(); }});
  return r;
}

}  // namespace gpud::components
