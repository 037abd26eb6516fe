#include "components/host/fuse.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <vector>

#include "components/snapshot_metric.h"

namespace gpud::components {

namespace {

std::optional<double> percent_of(const std::optional<uint64_t>& part,
                                 const std::optional<uint64_t>& whole) {
  if (!part || !whole || *whole == 0) return std::nullopt;
  return 100.0 * static_cast<double>(*part) / static_cast<double>(*whole);
}

std::string describe(const host::FuseConnection& c) {
  std::string s = fuse_device_name(c);
  if (!c.mount_point.empty()) s += " on " + c.mount_point;
  if (s != c.id) s += " (connection " + c.id + ")";
  return s;
}

std::string percent_text(const std::optional<double>& p) {
  return p ? fmt::format("{:.1f}%", *p) : std::string("unknown");
}

}  // namespace

std::optional<double> fuse_congested_percent(const host::FuseConnection& c) {
  return percent_of(c.waiting, c.congestion_threshold);
}

std::optional<double> fuse_max_background_percent(const host::FuseConnection& c) {
  return percent_of(c.waiting, c.max_background);
}

bool fuse_congested(const host::FuseConnection& c) {
  auto cp = fuse_congested_percent(c);
  auto mp = fuse_max_background_percent(c);
  return (cp && *cp >= kFuseCongestedPercent) || (mp && *mp >= kFuseMaxBackgroundPercent);
}

std::string fuse_device_name(const host::FuseConnection& c) {
  return c.source.empty() ? c.id : c.source;
}

nlohmann::json to_json(const host::FuseConnections& s) {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& c : s.connections) {
    nlohmann::json j = {{"connection", c.id},
                        {"device_name", fuse_device_name(c)},
                        {"mount_point", c.mount_point},
                        {"fs_type", c.fs_type}};
    if (c.waiting) j["waiting"] = *c.waiting;
    if (c.congestion_threshold) j["congestion_threshold"] = *c.congestion_threshold;
    if (c.max_background) j["max_background"] = *c.max_background;
    if (auto p = fuse_congested_percent(c)) j["congested_percent_against_threshold"] = *p;
    if (auto p = fuse_max_background_percent(c)) j["max_background_percent_against_threshold"] = *p;
    if (!c.error.empty()) j["error"] = c.error;
    list.push_back(std::move(j));
  }
  return {{"fuse_loaded", s.control_fs_present}, {"connections", std::move(list)}};
}

CheckResult evaluate_fuse(const Result<host::FuseConnections>& snapshot) {
  if (!snapshot) {
    CheckResult r = single_state("fuse", Health::kUnhealthy, "failed to read FUSE connections");
    r.states[0].error = snapshot.error().message;
    r.detail = "error: " + snapshot.error().message + "\n";
    return r;
  }
  const host::FuseConnections& s = *snapshot;
  std::vector<std::string> unreadable, congested;
  std::string detail;
  for (const auto& c : s.connections) {
    if (!c.error.empty()) unreadable.push_back(describe(c) + ": " + c.error);
    if (fuse_congested(c))
      congested.push_back(fmt::format("{} ({} of congestion threshold, {} of max background)",
                                      describe(c), percent_text(fuse_congested_percent(c)),
                                      percent_text(fuse_max_background_percent(c))));
    detail += fmt::format(
        "{}: waiting {}, congested {}, max background {}{}\n", describe(c),
        c.waiting ? std::to_string(*c.waiting) : "unknown", percent_text(fuse_congested_percent(c)),
        percent_text(fuse_max_background_percent(c)), c.error.empty() ? "" : " (" + c.error + ")");
  }
  Health health = Health::kHealthy;
  std::vector<std::string> reasons;
  if (!unreadable.empty()) {
    health = Health::kUnhealthy;
    reasons.push_back(fmt::format("FUSE connection unreadable: {}", fmt::join(unreadable, "; ")));
  }
  if (!congested.empty()) {
    health = worst(health, Health::kDegraded);
    reasons.push_back(fmt::format("FUSE connection congested: {}", fmt::join(congested, "; ")));
  }
  std::string reason;
  if (!reasons.empty())
    reason = fmt::format("{}", fmt::join(reasons, "; "));
  else if (!s.control_fs_present)
    reason = "no FUSE connections (fuse not loaded)";
  else if (s.connections.empty())
    reason = "no FUSE connections";
  else
    reason = fmt::format("{} FUSE connection(s), none congested", s.connections.size());
  CheckResult r = single_state("fuse", health, std::move(reason), std::nullopt, to_json(s));
  if (!unreadable.empty()) r.states[0].error = fmt::format("{}", fmt::join(unreadable, "; "));
  r.detail = detail.empty() ? "no FUSE connections\n" : detail;
  return r;
}

Event fuse_congestion_event(const host::FuseConnection& c, TimePoint now) {
  Event e;
  e.component = "fuse";
  e.time = std::chrono::time_point_cast<std::chrono::seconds>(now);
  e.name = kFuseEventName;
  e.type = EventType::kCritical;
  e.message = fmt::format(
      "FUSE connection {} congested: {} of congestion threshold, {} of max "
      "background ({} requests waiting)",
      describe(c), percent_text(fuse_congested_percent(c)),
      percent_text(fuse_max_background_percent(c)),
      c.waiting ? std::to_string(*c.waiting) : "unknown");
  e.extra_info = {
      {"device_name", fuse_device_name(c)}, {"connection", c.id}, {"mount_point", c.mount_point}};
  if (auto p = fuse_congested_percent(c)) e.extra_info["congested_percent_against_threshold"] = *p;
  if (auto p = fuse_max_background_percent(c))
    e.extra_info["max_background_percent_against_threshold"] = *p;
  return e;
}

namespace {

// One series per connection whose value could be read, labelled with its device and connection.
void per_connection(const host::FuseConnections& s, MetricSeries& out,
                    std::optional<double> (*read)(const host::FuseConnection&)) {
  for (const auto& c : s.connections)
    if (auto v = read(c))
      out.emplace_back(Labels{{"device_name", fuse_device_name(c)}, {"connection", c.id}}, *v);
}

constexpr SnapshotMetric<host::FuseConnections> kMetrics[] = {
    {.name = "fuse_connections_congested_percent_against_threshold",
     .help = "FUSE requests waiting in percent of the connection's congestion threshold",
     .series = [](const host::FuseConnections& s,
                  MetricSeries& out) { per_connection(s, out, fuse_congested_percent); }},
    {.name = "fuse_connections_max_background_percent_against_threshold",
     .help = "FUSE requests waiting in percent of the connection's max_background",
     .series = [](const host::FuseConnections& s,
                  MetricSeries& out) { per_connection(s, out, fuse_max_background_percent); }},
};
static_assert(valid_metric_table(kMetrics));

}  // namespace

FuseComponent::FuseComponent(const ComponentContext& ctx)
    : Component(ctx), fs_(ctx.config->host_root) {
  describe_metrics(ctx.metrics, kMetrics);
}

CheckResult FuseComponent::check() {
  auto mountinfo = fs_.read("/proc/self/mountinfo");
  auto snapshot = host::read_fuse_connections(fs_, mountinfo ? *mountinfo : std::string());
  publish_metrics(ctx().metrics, name(), kMetrics, snapshot);
  if (snapshot) {
    // GPUd means to record fuse_connections when a connection is congested (its code never
    // does); here one event per connection each time it becomes congested.
    const TimePoint now = Clock::now();
    std::set<std::string> now_congested;
    std::lock_guard lock(mu_);
    for (const auto& c : snapshot->connections) {
      if (!fuse_congested(c)) continue;
      now_congested.insert(c.id);
      if (!congested_.contains(c.id)) record(fuse_congestion_event(c, now));
    }
    congested_ = std::move(now_congested);
  }
  return evaluate_fuse(snapshot);
}

}  // namespace gpud::components
