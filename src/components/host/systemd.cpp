#include "components/host/systemd.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <nlohmann/json.hpp>

#include "components/snapshot_metric.h"
#include "core/log.h"
#include "core/time_util.h"

namespace gpud::components {

const std::vector<std::string>& default_systemd_units() {
  static const std::vector<std::string> kUnits = {
      "gpud.service",       "containerd.service",          "docker.service",
      "kubelet.service",    "nvidia-persistenced.service", "nvidia-fabricmanager.service",
      "nvidia-dcgm.service"};
  return kUnits;
}

void RestartHistory::observe(TimePoint now, uint64_t n_restarts) {
  if (!samples_.empty()) {
    uint64_t last = samples_.back().second;
    if (n_restarts < last) samples_.clear();
    if (n_restarts != last) changed_at_ = now;
  }
  samples_.emplace_back(now, n_restarts);
  // Keep one sample older than any window asked for, so an increase across it still counts.
  while (samples_.size() > 2 && now - samples_[1].first > std::chrono::hours(1))
    samples_.pop_front();
}

uint64_t RestartHistory::restarts_within(TimePoint now, std::chrono::seconds window) const {
  if (samples_.empty()) return 0;
  // The newest sample at or before the window's start is the base; without one, the oldest.
  uint64_t base = samples_.front().second;
  for (const auto& [t, n] : samples_) {
    if (now - t < window) break;
    base = n;
  }
  return samples_.back().second - base;
}

bool restart_looping(const SystemdUnitReport& u) {
  if (u.recent_restarts >= kRestartLoopCount) return true;
  return u.state.sub_state == "auto-restart" && u.state.n_restarts.value_or(0) >= kRestartLoopCount;
}

namespace {

bool installed(const host::UnitState& s) {
  return s.load_state != "not-found" && s.load_state != "masked";
}

nlohmann::json to_json(const SystemdUnitReport& u) {
  nlohmann::json j = {{"unit", u.state.id},
                      {"load_state", u.state.load_state},
                      {"active_state", u.state.active_state},
                      {"sub_state", u.state.sub_state},
                      {"state_changed", u.state.state_changed},
                      {"required", u.required},
                      {"restarts_within_window", u.recent_restarts}};
  if (u.state.n_restarts) j["n_restarts"] = *u.state.n_restarts;
  if (u.restarts_changed_at) j["restarts_changed_at"] = format_rfc3339(*u.restarts_changed_at);
  if (!u.state.error.empty()) j["error"] = u.state.error;
  return j;
}

}  // namespace

CheckResult evaluate_systemd(const Result<std::vector<SystemdUnitReport>>& units) {
  if (!units) {
    CheckResult r = single_state("systemd", Health::kUnhealthy, "failed to read systemd units");
    r.states[0].error = units.error().message;
    r.detail = "error: " + units.error().message + "\n";
    return r;
  }
  std::vector<std::string> problems, states, errors;
  nlohmann::json list = nlohmann::json::array();
  std::string detail;
  for (const SystemdUnitReport& u : *units) {
    const host::UnitState& s = u.state;
    if (!s.error.empty()) {
      problems.push_back(fmt::format("unit {} unreadable ({})", s.id, s.error));
      errors.push_back(s.id + ": " + s.error);
      list.push_back(to_json(u));
      detail += fmt::format("{}: {}\n", s.id, s.error);
      continue;
    }
    if (!installed(s)) {
      if (u.required) problems.push_back(fmt::format("unit {} is {}", s.id, s.load_state));
      if (u.required) list.push_back(to_json(u));
      detail += fmt::format("{}: {}\n", s.id, s.load_state);
      continue;
    }
    list.push_back(to_json(u));
    std::string restarts = s.n_restarts ? fmt::format(", {} restarts", *s.n_restarts) : "";
    if (u.restarts_changed_at)
      restarts += fmt::format(" (changed {})", format_rfc3339(*u.restarts_changed_at));
    detail += fmt::format("{}: {} ({}){}{}\n", s.id, s.active_state, s.sub_state, restarts,
                          s.state_changed.empty() ? "" : ", since " + s.state_changed);
    if (s.active_state == "failed")
      problems.push_back(fmt::format("unit {} failed ({})", s.id, s.sub_state));
    else if (restart_looping(u))
      problems.push_back(fmt::format(
          "unit {} is restart-looping ({} restarts, {} within {}; now {}/{})", s.id,
          s.n_restarts.value_or(0), u.recent_restarts,
          format_duration(std::chrono::duration_cast<std::chrono::seconds>(kRestartLoopWindow)),
          s.active_state, s.sub_state));
    else
      states.push_back(fmt::format("{} {}", s.id, s.active_state));
  }
  Health health = problems.empty() ? Health::kHealthy : Health::kUnhealthy;
  std::string reason;
  if (!problems.empty())
    reason = fmt::format("{}", fmt::join(problems, "; "));
  else if (states.empty())
    reason = "none of the watched units is installed";
  else
    reason = fmt::format("{}", fmt::join(states, ", "));
  CheckResult r = single_state("systemd", health, std::move(reason), std::nullopt,
                               nlohmann::json{{"units", list}});
  if (!errors.empty()) r.states[0].error = fmt::format("{}", fmt::join(errors, "; "));
  r.detail = detail;
  return r;
}

CheckResult evaluate_systemd_not_checked(const std::string& why) {
  CheckResult r = single_state("systemd", Health::kHealthy,
                               "not checked: cannot ask the host's systemd (" + why + ")");
  r.states[0].error = why;  // nothing was read: not a successful check
  r.states[0].findings.push_back(
      Finding::blocked(Subject::host(), Health::kHealthy, "systemd units: " + why, "systemd"));
  r.detail = r.states[0].reason + "\n";
  return r;
}

namespace {

// A unit has series when it was read and is installed.
bool has_series(const SystemdUnitReport& u) { return u.state.error.empty() && installed(u.state); }

constexpr SnapshotMetric<std::vector<SystemdUnitReport>> kMetrics[] = {
    {.name = "systemd_unit_active",
     .help = "1 when the systemd unit is active, else 0",
     .series =
         [](const std::vector<SystemdUnitReport>& units, MetricSeries& out) {
           for (const auto& u : units)
             if (has_series(u))
               out.emplace_back(Labels{{"unit", u.state.id}},
                                u.state.active_state == "active" ? 1 : 0);
         }},
    {.name = "systemd_unit_restarts",
     .help = "Automatic restarts of the systemd service since it was last started (NRestarts)",
     .series =
         [](const std::vector<SystemdUnitReport>& units, MetricSeries& out) {
           for (const auto& u : units)
             if (has_series(u) && u.state.n_restarts)
               out.emplace_back(Labels{{"unit", u.state.id}},
                                static_cast<double>(*u.state.n_restarts));
         }},
};
static_assert(valid_metric_table(kMetrics));

}  // namespace

SystemdComponent::SystemdComponent(const ComponentContext& ctx)
    : Component(ctx), systemd_running_(host::systemd_running(host::HostFs(ctx.config->host_root))) {
  describe_metrics(ctx.metrics, kMetrics);
}

CheckResult SystemdComponent::check() {
  const bool configured = !config().systemd_units.empty();
  const auto& units = configured ? config().systemd_units : default_systemd_units();
  host::SystemdAnswer answer = host::ask_systemd(
      host::HostFs(config().host_root), config().systemctl_command, config().executable_search_path,
      units, std::chrono::duration_cast<std::chrono::milliseconds>(kSystemctlTimeout));
  auto& states = answer.units;
  if (!states) {
    publish_metrics(ctx().metrics, name(), kMetrics, nullptr);
    if (!answer.reached) {
      if (!warned_not_reached_.exchange(true))
        logger("systemd")->warn("cannot ask the host's systemd: {}", states.error().message);
      return evaluate_systemd_not_checked(states.error().message);
    }
    return evaluate_systemd(states.error());
  }
  const TimePoint now = Clock::now();
  std::vector<SystemdUnitReport> reports;
  {
    std::lock_guard lock(mu_);
    for (host::UnitState& s : *states) {
      SystemdUnitReport u;
      u.required = configured;
      if (s.n_restarts && s.error.empty()) {
        RestartHistory& h = history_[s.id];
        h.observe(now, *s.n_restarts);
        u.recent_restarts = h.restarts_within(now, kRestartLoopWindow);
        u.restarts_changed_at = h.changed_at();
      }
      u.state = std::move(s);
      reports.push_back(std::move(u));
    }
  }
  publish_metrics(ctx().metrics, name(), kMetrics, &reports);
  return evaluate_systemd(reports);
}

}  // namespace gpud::components
