#include "components/host/fd.h"

#include <fmt/format.h>

#include "components/snapshot_metric.h"
#include "core/log.h"
#include "host/file_nr.h"

namespace gpud::components {

double FdSnapshot::used_percent() const {
  if (file_max == 0) return 0;
  return 100.0 * static_cast<double>(allocated_file_handles) / static_cast<double>(file_max);
}

nlohmann::json to_json(const FdSnapshot& s) {
  nlohmann::json j;
  j["allocated_file_handles"] = s.allocated_file_handles;
  j["file_max"] = s.file_max;
  j["used_percent"] = s.used_percent();
  return j;
}

CheckResult evaluate_fd(const Result<FdSnapshot>& snapshot) {
  if (!snapshot) {
    CheckResult r = single_state("fd", Health::kUnhealthy, "failed to collect file handle stats");
    r.states[0].error = snapshot.error().message;
    r.detail = "error: " + snapshot.error().message + "\n";
    return r;
  }
  const FdSnapshot& s = *snapshot;
  double pct = s.used_percent();
  std::string usage = fmt::format("{} of {} file handles allocated ({:.2f}%)",
                                  s.allocated_file_handles, s.file_max, pct);
  Health health = Health::kHealthy;
  std::string reason = usage;
  if (pct > kFdUnhealthyPercent) {
    health = Health::kUnhealthy;
    reason = fmt::format("file handle usage above {:.0f}%: {}", kFdUnhealthyPercent, usage);
  } else if (pct > kFdDegradedPercent) {
    health = Health::kDegraded;
    reason = fmt::format("file handle usage above {:.0f}%: {}", kFdDegradedPercent, usage);
  }
  std::optional<SuggestedActions> actions;
  if (health != Health::kHealthy)
    actions = SuggestedActions{"check/restart user applications for leaky file descriptors",
                               {RepairAction::kCheckUserAppAndGpu}};
  CheckResult r = single_state("fd", health, std::move(reason), std::move(actions), to_json(s));
  r.detail = fmt::format("allocated file handles: {}\nfile-max: {}\nused: {:.2f}%\n",
                         s.allocated_file_handles, s.file_max, pct);
  return r;
}

namespace {

constexpr SnapshotMetric<FdSnapshot> kMetrics[] = {
    {.name = "fd_allocated_file_handles",
     .help = "File handles allocated system-wide (file-nr)",
     .value = [](const FdSnapshot& s) { return metric_value(s.allocated_file_handles); }},
    {.name = "fd_file_max",
     .help = "System-wide file handle limit (file-max)",
     .value = [](const FdSnapshot& s) { return metric_value(s.file_max); }},
    {.name = "fd_used_percent",
     .help = "Allocated file handles in percent of file-max",
     .value = [](const FdSnapshot& s) { return metric_value(s.used_percent()); }},
};
static_assert(valid_metric_table(kMetrics));

}  // namespace

FdComponent::FdComponent(const ComponentContext& ctx) : Component(ctx), fs_(ctx.config->host_root) {
  describe_metrics(ctx.metrics, kMetrics);
}

Result<FdSnapshot> FdComponent::collect() {
  auto nr_text = fs_.read("/proc/sys/fs/file-nr");
  if (!nr_text) return nr_text.error();
  auto nr = host::parse_file_nr(*nr_text);
  if (!nr) return nr.error();
  FdSnapshot s;
  s.allocated_file_handles = nr->allocated;
  s.file_max = nr->max;
  auto max_text = fs_.read("/proc/sys/fs/file-max");
  Result<uint64_t> max =
      max_text ? host::parse_file_max(*max_text) : Result<uint64_t>(max_text.error());
  if (max) {
    s.file_max = *max;
  } else if (!warned_file_max_.exchange(true)) {
    logger("fd")->warn("cannot read file-max ({}); using the limit from file-nr",
                       max.error().message);
  }
  return s;
}

CheckResult FdComponent::check() {
  auto snapshot = collect();
  publish_metrics(ctx().metrics, name(), kMetrics, snapshot);
  return evaluate_fd(snapshot);
}

}  // namespace gpud::components
