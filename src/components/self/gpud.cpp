#include "components/self/gpud.h"

#include <fmt/format.h>

#include <algorithm>

#include "components/snapshot_metric.h"
#include "core/time_util.h"
#include "nvml/source.h"

namespace gpud::components {
namespace {

std::string mib(int64_t bytes) {
  return fmt::format("{:.1f} MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
}

struct Finding {
  Health health;
  std::string reason;
};

}  // namespace

nlohmann::json to_json(const GpudSnapshot& s) {
  nlohmann::json j;
  j["db_path"] = s.db_path;
  j["db_size_bytes"] = s.db_size_bytes ? nlohmann::json(*s.db_size_bytes) : nlohmann::json();
  j["store_writable"] = s.store.writable;
  j["store_usable"] = s.store.usable;
  j["store_last_error"] = s.store.last_error;
  j["store_errors"] = s.store.errors_by_op;
  nlohmann::json q = nlohmann::json::array();
  for (const auto& x : s.store.quarantines)
    q.push_back({{"path", x.path}, {"time", format_rfc3339(x.time)}, {"reason", x.reason}});
  j["quarantines"] = q;
  j["quarantined_files"] = s.quarantined_files;
  j["event_backlog"] = s.event_backlog;
  j["event_backlog_capacity"] = s.event_backlog_capacity;
  j["events_dropped"] = s.events_dropped;
  nlohmann::json k;
  k["followed"] = s.kernel_log.followed;
  if (!s.kernel_log.error.empty()) k["error"] = s.kernel_log.error;
  k["records"] = s.kernel_log.records;
  k["overruns"] = s.kernel_log.overruns;
  k["read_errors"] = s.kernel_log.read_errors;
  k["foreign_records"] = s.kernel_log.foreign_records;
  if (s.kernel_log.record_errors) k["record_errors"] = *s.kernel_log.record_errors;
  if (s.kernel_log.parse_errors) k["parse_errors"] = *s.kernel_log.parse_errors;
  j["kernel_log"] = k;
  j["nvml_status"] = s.nvml_status;
  if (!s.sinks.empty()) {
    nlohmann::json sinks = nlohmann::json::array();
    for (const SinkStatus& sink : s.sinks)
      sinks.push_back({{"name", sink.name}, {"ok", sink.error.empty()}, {"error", sink.error}});
    j["sinks"] = std::move(sinks);
  }
  return j;
}

CheckResult evaluate_gpud(const GpudSnapshot& s, const GpudAcknowledged& ack, TimePoint now) {
  std::vector<Finding> findings;
  const auto& st = s.store;
  if (!st.usable) {
    findings.push_back(
        {Health::kUnhealthy, fmt::format("state database unusable ({}); {} events wait in memory",
                                         st.last_error, s.event_backlog)});
  } else if (!st.writable || s.event_backlog > 0) {
    findings.push_back(
        {Health::kDegraded,
         fmt::format("state database cannot write ({}); {} events wait in memory and are lost if "
                     "gpud stops before it can",
                     st.last_error, s.event_backlog)});
  }
  if (s.events_dropped > ack.events_dropped)
    findings.push_back(
        {Health::kUnhealthy,
         fmt::format("{} events lost: the state database could not write and {} events already "
                     "waited in memory",
                     s.events_dropped - ack.events_dropped, s.event_backlog_capacity)});
  if (st.quarantines.size() > ack.quarantines) {
    const store::Quarantine& latest = st.quarantines.back();
    size_t n = st.quarantines.size() - ack.quarantines;
    findings.push_back(
        {Health::kDegraded,
         fmt::format("state database was corrupt ({}) and moved to {} at {}{}; events before are "
                     "not in the history",
                     latest.reason, latest.path, format_rfc3339(latest.time),
                     n > 1 ? fmt::format(" ({} times)", n) : "")});
  }
  const KernelLogCounters& k = s.kernel_log;
  if (!k.followed) findings.push_back({Health::kDegraded, "kernel log not followed: " + k.error});
  if (k.overruns > ack.overruns)
    findings.push_back(
        {Health::kDegraded, fmt::format("kernel log: {} records lost to ring buffer overruns",
                                        k.overruns - ack.overruns)});
  if (k.read_errors > ack.read_errors)
    findings.push_back({Health::kDegraded, fmt::format("kernel log: {} read errors",
                                                       k.read_errors - ack.read_errors)});
  if (k.record_errors && *k.record_errors > ack.record_errors)
    findings.push_back({Health::kDegraded, fmt::format("kernel log: {} records could not be parsed",
                                                       *k.record_errors - ack.record_errors)});
  if (k.parse_errors && *k.parse_errors > ack.parse_errors)
    findings.push_back(
        {Health::kDegraded, fmt::format("kernel log: {} matched lines could not be parsed",
                                        *k.parse_errors - ack.parse_errors)});
  for (const SinkStatus& sink : s.sinks)
    if (!sink.error.empty())
      findings.push_back({Health::kDegraded, fmt::format("{}: {}", sink.name, sink.error)});

  Health health = Health::kHealthy;
  std::string reason;
  if (findings.empty()) {
    std::string size = s.db_size_bytes ? mib(*s.db_size_bytes) + ", " : "";
    reason = fmt::format("state database writable ({}{}); kernel log followed ({} records{})", size,
                         s.db_path.empty() ? "in memory" : s.db_path, k.records,
                         k.foreign_records == 0
                             ? ""
                             : fmt::format(", {} written by processes ignored", k.foreign_records));
  } else {
    std::stable_sort(findings.begin(), findings.end(), [](const Finding& a, const Finding& b) {
      return severity(a.health) > severity(b.health);
    });
    health = findings.front().health;
    for (const Finding& f : findings) reason += (reason.empty() ? "" : "; ") + f.reason;
  }
  if (!s.nvml_status.empty()) {
    std::string nvml = s.nvml_status;
    std::replace(nvml.begin(), nvml.end(), '_', ' ');
    reason += "; NVML " + nvml;
  }
  CheckResult r = single_state(kGpudComponent, health, reason, std::nullopt, to_json(s), now);
  if (!st.last_error.empty() && health != Health::kHealthy) r.states.front().error = st.last_error;
  r.detail = reason + "\n";
  return r;
}

namespace {

constexpr SnapshotMetric<GpudSnapshot> kMetrics[] = {
    {.name = "gpud_store_writable",
     .help = "1 while the state database takes writes, 0 while events wait in memory",
     .value =
         [](const GpudSnapshot& s) {
           return metric_value(s.store.usable && s.store.writable && s.event_backlog == 0 ? 1 : 0);
         }},
    {.name = "gpud_store_quarantined_files",
     .help = "Corrupt state databases moved aside (<state file>.corrupt-*) in the data dir",
     .value = [](const GpudSnapshot& s) { return metric_value(s.quarantined_files.size()); }},
    {.name = "gpud_kernel_log_followed",
     .help = "1 while gpud follows the kernel log",
     .value = [](const GpudSnapshot& s) { return metric_value(s.kernel_log.followed ? 1 : 0); }},
    {.name = "gpud_kernel_log_overruns_total",
     .help = "Kernel-log records overwritten in the ring buffer before gpud read them",
     .kind = MetricKind::kCounter,
     .value = [](const GpudSnapshot& s) { return metric_value(s.kernel_log.overruns); }},
    {.name = "gpud_kernel_log_read_errors_total",
     .help = "Failed reads of the kernel log",
     .kind = MetricKind::kCounter,
     .value = [](const GpudSnapshot& s) { return metric_value(s.kernel_log.read_errors); }},
    {.name = "gpud_kernel_log_foreign_records_total",
     .help = "Kernel-log records a process wrote to /dev/kmsg, not the kernel: read and ignored",
     .kind = MetricKind::kCounter,
     .value = [](const GpudSnapshot& s) { return metric_value(s.kernel_log.foreign_records); }},
    {.name = "gpud_kernel_log_record_errors_total",
     .help = "Kernel-log records that could not be parsed",
     .kind = MetricKind::kCounter,
     .value = [](const GpudSnapshot& s) { return metric_value(s.kernel_log.record_errors); }},
    {.name = "gpud_kernel_log_parse_errors_total",
     .help = "Kernel-log records dropped because matching them failed",
     .kind = MetricKind::kCounter,
     .value = [](const GpudSnapshot& s) { return metric_value(s.kernel_log.parse_errors); }},
    // Kept beside accelerator_nvidia_nvml_up for GPUd's dashboards, with its meaning: NVML
    // answered its last collection (a hung driver is 0 here too, not only a failed load). Absent
    // without an NVML source (no NVIDIA components in this process).
    {.name = "gpud_nvml_up",
     .help = "1 while NVML is loaded and initialized",
     .value = [](const GpudSnapshot& s) -> std::optional<double> {
       if (s.nvml_status.empty()) return std::nullopt;
       return s.nvml_answered ? 1 : 0;
     }},
};
static_assert(valid_metric_table(kMetrics));

}  // namespace

GpudComponent::GpudComponent(const ComponentContext& ctx) : Component(ctx) {
  describe_metrics(ctx.metrics, kMetrics);
}

bool GpudComponent::supported() const { return ctx().gpud != nullptr && !ctx().scan_mode; }

GpudSnapshot GpudComponent::collect() const {
  GpudSnapshot s;
  const GpudProbes& p = *ctx().gpud;
  if (p.db != nullptr) {
    s.db_path = p.db->path();
    s.store = p.db->health();
    if (auto size = p.db->size_bytes(); size) s.db_size_bytes = *size;
    s.quarantined_files = store::Database::quarantined_files(s.db_path);
  }
  if (p.events != nullptr) {
    s.event_backlog = p.events->backlog_size();
    s.event_backlog_capacity = p.events->backlog_capacity();
    s.events_dropped = p.events->dropped();
  }
  if (p.kernel_log)
    s.kernel_log = p.kernel_log();
  else
    s.kernel_log.error = "no kernel-log follower in this process";
  if (ctx().nvidia != nullptr) {
    s.nvml_status = std::string(nvml::to_string(ctx().nvidia->status()));
    s.nvml_answered = ctx().nvidia->answered_last_collection();
  }
  if (p.sinks) s.sinks = p.sinks();
  return s;
}

CheckResult GpudComponent::check() {
  GpudSnapshot s = collect();
  publish_metrics(ctx().metrics, name(), kMetrics, &s);
  std::lock_guard lock(mu_);
  return evaluate_gpud(s, acknowledged_);
}

Result<void> GpudComponent::set_healthy(const Acknowledgement&) {
  GpudSnapshot s = collect();
  std::lock_guard lock(mu_);
  acknowledged_.events_dropped = s.events_dropped;
  acknowledged_.quarantines = s.store.quarantines.size();
  acknowledged_.overruns = s.kernel_log.overruns;
  acknowledged_.read_errors = s.kernel_log.read_errors;
  acknowledged_.record_errors = s.kernel_log.record_errors.value_or(0);
  acknowledged_.parse_errors = s.kernel_log.parse_errors.value_or(0);
  return {};
}

}  // namespace gpud::components
