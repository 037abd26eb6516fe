#include "components/kernel_log_support.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "core/reboot_rules.h"
#include "core/time_util.h"
#include "nvml/source.h"

namespace gpud::components {

bool nvidia_kernel_log_supported(const ComponentContext& ctx, std::string_view component,
                                 std::atomic<bool>& has_events) {
  if (ctx.kernel_log_scan || ctx.nvidia_pci_present) return true;
  if (ctx.nvidia != nullptr && ctx.nvidia->status() != nvml::NvmlStatus::kNotFound) return true;
  return has_recorded_events(ctx, component, has_events);
}

bool has_recorded_events(const ComponentContext& ctx, std::string_view component,
                         std::atomic<bool>& has_events) {
  if (has_events.load()) return true;
  if (ctx.events == nullptr) return false;
  auto ev = ctx.events->query_page(component, TimePoint{}, TimePoint::max(), 0, 1);
  if (ev && !ev->empty()) has_events = true;
  return has_events.load();
}

Result<std::vector<TimePoint>> reboot_times(const EventLog* log, TimePoint since) {
  std::vector<TimePoint> out;
  if (log == nullptr) return out;
  auto ev = log->query("os", since, TimePoint::max());
  if (!ev) return ev.error();
  for (const Event& e : *ev)
    if (e.name == "reboot") out.push_back(e.time);
  return out;
}

TimePoint lookback_start(const ComponentContext& ctx, std::chrono::seconds lookback,
                         TimePoint now) {
  if (ctx.scan_mode) return TimePoint{};
  if (lookback.count() <= 0) lookback = ctx.config->events_retention;
  return saturating_sub(now, lookback);
}

KernelLogSummary summary_of(const std::vector<Event>& events) {
  KernelLogSummary s;
  const Event* latest = nullptr;
  for (const Event& e : events) {
    ++s.by_name[e.name];
    if (latest == nullptr || e.time > latest->time) latest = &e;
  }
  s.total = events.size();
  if (latest != nullptr) s.latest_message = latest->message;
  s.newest = events;
  std::stable_sort(s.newest.begin(), s.newest.end(),
                   [](const Event& a, const Event& b) { return a.time > b.time; });
  if (s.newest.size() > kListedKernelLogEvents) s.newest.resize(kListedKernelLogEvents);
  return s;
}

Result<KernelLogSummary> kernel_log_summary(const ComponentContext& ctx, std::string_view component,
                                            TimePoint since,
                                            const std::vector<std::string>& names) {
  KernelLogSummary s;
  if (ctx.events == nullptr) return s;
  auto selected = [&](const std::string& name) {
    return names.empty() || std::find(names.begin(), names.end(), name) != names.end();
  };
  // Grouped on the name alone: two events of each name, whatever their number.
  auto d = digest_events(*ctx.events, component, since, TimePoint::max(), {}, {});
  if (!d) return d.error();
  for (size_t i = 0; i < d->events.size(); ++i) {
    const Event& e = d->events[i];
    if (!selected(e.name)) continue;
    if (s.total == 0) s.latest_message = e.message;  // the digest is newest first
    s.by_name[e.name] += d->counts[i];
    s.total += d->counts[i];
  }
  auto newest =
      ctx.events->query_page(component, since, TimePoint::max(), 0, kListedKernelLogEvents);
  if (!newest) return newest.error();
  for (Event& e : unacknowledged(std::move(*newest)))
    if (selected(e.name)) s.newest.push_back(std::move(e));
  return s;
}

std::string summarize(const KernelLogSummary& s) {
  if (s.total == 0) return "";
  std::string names;
  for (const auto& [n, c] : s.by_name)
    names += fmt::format("{}{} {}", names.empty() ? "" : ", ", c, n);
  return fmt::format("{} kernel-log event{} ({}), latest: {}", s.total, s.total == 1 ? "" : "s",
                     names, s.latest_message);
}

std::string summarize_events(const std::vector<Event>& events) {
  return summarize(summary_of(events));
}

void merge_verdict(CheckResult& r, const KernelLogVerdict& v) {
  if (v.health == Health::kHealthy && v.reason == "ok") return;
  if (r.states.empty()) {
    r.states.push_back(single_state("", v.health, v.reason, v.actions).states.front());
    return;
  }
  HealthState& s = r.states.front();
  if (severity(v.health) > severity(s.health)) {
    s.health = v.health;
    s.reason = s.reason == "ok" || s.reason.empty() ? v.reason : v.reason + "; " + s.reason;
    if (v.actions) s.suggested_actions = v.actions;
  } else {
    s.reason += "; " + v.reason;
  }
}

void append_event_summary(CheckResult& r, const KernelLogSummary& summary) {
  std::string text = summarize(summary);
  if (text.empty() || r.states.empty()) return;
  HealthState& s = r.states.front();
  s.reason += (s.reason.empty() ? "" : "; ") + text;
  nlohmann::json list = nlohmann::json::array();
  for (const Event& e : summary.newest)
    list.push_back(
        {{"time",
          std::chrono::duration_cast<std::chrono::seconds>(e.time.time_since_epoch()).count()},
         {"name", e.name},
         {"message", e.message}});
  s.extra_info["kernel_log_events"] = list.dump();
}

void append_kernel_log_events(CheckResult& r, const ComponentContext& ctx,
                              std::string_view component, const std::vector<std::string>& names) {
  auto summary = kernel_log_summary(
      ctx, component, lookback_start(ctx, std::chrono::seconds(0), Clock::now()), names);
  if (!summary) {
    merge_verdict(r, unreadable_history(summary.error()));
    return;
  }
  append_event_summary(r, *summary);
}

Result<std::vector<Event>> component_events(const ComponentContext& ctx, std::string_view component,
                                            TimePoint since) {
  if (ctx.events == nullptr) return std::vector<Event>{};
  auto events = ctx.events->query(component, since, TimePoint::max());
  if (!events) return events.error();
  return unacknowledged(std::move(*events));
}

Result<KernelLogHistory> kernel_log_history(const ComponentContext& ctx, std::string_view component,
                                            TimePoint since) {
  KernelLogHistory h;
  auto events = component_events(ctx, component, since);
  if (!events) return events.error();
  h.events = std::move(*events);
  if (ctx.scan_mode) return h;
  auto reboots = reboot_times(ctx.events, since);
  if (!reboots) return reboots.error();
  h.reboots = std::move(*reboots);
  return h;
}

Result<KernelLogDigest> kernel_log_digest(const ComponentContext& ctx, std::string_view component,
                                          TimePoint since,
                                          const std::vector<std::string>& key_paths,
                                          size_t newest_limit) {
  KernelLogDigest d;
  if (ctx.events == nullptr) return d;
  if (!ctx.scan_mode) {
    auto reboots = reboot_times(ctx.events, since);
    if (!reboots) return reboots.error();
    d.reboots = std::move(*reboots);
  }
  auto digest =
      digest_events(*ctx.events, component, since, TimePoint::max(), key_paths, d.reboots);
  if (!digest) return digest.error();
  d.digest = std::move(*digest);
  auto newest = ctx.events->query_page(component, since, TimePoint::max(), 0, newest_limit);
  if (!newest) return newest.error();
  d.newest = unacknowledged(std::move(*newest));
  return d;
}

KernelLogVerdict unreadable_history(const Error& e) {
  return {Health::kUnhealthy,
          "cannot read the kernel-log history from the event store: " + e.message, std::nullopt};
}

KernelLogEventsComponent::KernelLogEventsComponent(const ComponentContext& ctx, std::string name,
                                                   std::vector<std::string> tags)
    : Component(ctx), name_(std::move(name)), tags_(std::move(tags)) {}

bool KernelLogEventsComponent::supported() const {
  return nvidia_kernel_log_supported(ctx(), name_, has_events_);
}

CheckResult KernelLogEventsComponent::check() {
  const TimePoint now = Clock::now();
  auto summary =
      kernel_log_summary(ctx(), name_, lookback_start(ctx(), std::chrono::seconds(0), now));
  if (!summary) {
    const KernelLogVerdict v = unreadable_history(summary.error());
    return single_state(name_, v.health, v.reason, v.actions, nullptr, now);
  }
  CheckResult r = single_state(name_, Health::kHealthy, "ok", std::nullopt, nullptr, now);
  append_event_summary(r, *summary);
  return r;
}

UnresolvedFailures unresolved_failures(const std::vector<const Event*>& events,
                                       const std::vector<TimePoint>& reboots,
                                       const std::vector<uint64_t>& counts) {
  std::map<std::string, std::vector<const Event*>> by_name;
  std::map<std::string, uint64_t> count_of;
  for (size_t i = 0; i < events.size(); ++i) {
    by_name[events[i]->name].push_back(events[i]);
    count_of[events[i]->name] += counts.empty() ? 1 : counts[i];
  }
  UnresolvedFailures out;
  for (const auto& [name, list] : by_name) {
    // A digest keeps a group's oldest and newest event, which is all the reboot rule looks at:
    // whether there is one failure or more, and which reboot precedes each.
    std::vector<TimePoint> times;
    for (const Event* e : list) times.push_back(e->time);
    auto action = evaluate_suggested_actions(reboots, times);
    if (!action) continue;  // a reboot after the newest failure resolved it
    out.actions.push_back(*action);
    const Event* latest = *std::max_element(list.begin(), list.end(),
                                            [](auto* a, auto* b) { return a->time < b->time; });
    out.reasons.push_back(fmt::format("{} ({}x)", latest->message, count_of[name]));
  }
  std::sort(out.reasons.begin(), out.reasons.end());
  return out;
}

}  // namespace gpud::components
