#include "components/nvidia/xid.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

#include "catalog/xid_catalog.h"
#include "components/kernel_log_support.h"
#include "components/nvidia/nvidia_component.h"
#include "core/log.h"
#include "nvml/source.h"

namespace gpud::components {

ErrorRecord to_error_record(const Event& e, std::string_view code_key) {
  ErrorRecord r;
  r.time = e.time;
  r.type = e.type;
  const auto& x = e.extra_info;
  r.code = x.contains(code_key) && x[code_key].is_number_integer() ? x[code_key].get<int>() : 0;
  if (x.contains("repair_actions") && x["repair_actions"].is_array() &&
      !x["repair_actions"].empty() && x["repair_actions"][0].is_string())
    r.action = parse_repair_action(x["repair_actions"][0].get<std::string>());
  else if (code_key == "xid" && r.code > 0) {
    auto info = catalog::lookup_xid(r.code);
    if (!info.repair_actions.empty()) r.action = info.repair_actions.front();
  }
  r.reason = e.message;
  const std::string bus = x.value("pci_bus_id", std::string());
  if (!bus.empty() && r.reason.find(bus) == std::string::npos) r.reason += " (" + bus + ")";
  const std::string uuid = x.value("gpu_uuid", std::string());
  if (!uuid.empty()) r.reason += " UUID:" + uuid;
  return r;
}

namespace {

ErrorVerdict evaluate(const std::vector<Event>& events, const std::vector<TimePoint>& reboots,
                      const RebootThresholds& t, std::string_view key, bool skip_remap_codes) {
  std::vector<ErrorRecord> records;
  // The store answers newest first; replaying oldest first keeps the log's order among events of
  // the same second (a saved log scanned at once).
  for (auto it = events.rbegin(); it != events.rend(); ++it) {
    const Event& e = *it;
    ErrorRecord r = to_error_record(e, key);
    if (skip_remap_codes && (r.code == 63 || r.code == 64)) continue;
    records.push_back(std::move(r));
  }
  for (TimePoint b : reboots) records.push_back({b, true, 0, EventType::kWarning, {}, ""});
  return replay_errors(std::move(records), t);
}

}  // namespace

CheckResult error_check_result(std::string_view component, const ErrorVerdict& v,
                               std::string_view what, const std::vector<Event>& events,
                               TimePoint now) {
  std::string reason = v.reason.empty() ? fmt::format("{} is healthy", what) : v.reason;
  CheckResult r = single_state(component, v.health, reason, v.actions, {}, now);
  r.states.front().name = std::string(component == kXidComponent ? "error_xid" : "error_sxid");
  r.detail = fmt::format("{} events in the lookback: {}\n", what, events.size());
  for (const Event& e : events) r.detail += "  " + e.message + "\n";
  return r;
}

ErrorVerdict evaluate_xid(const std::vector<Event>& events, const std::vector<TimePoint>& reboots,
                          const RebootThresholds& thresholds, bool row_remapping) {
  return evaluate(events, reboots, thresholds, "xid", row_remapping);
}

ErrorVerdict evaluate_sxid(const std::vector<Event>& events, const std::vector<TimePoint>& reboots,
                           const RebootThresholds& thresholds) {
  return evaluate(events, reboots, thresholds, "sxid", false);
}

Result<RebootThresholds> xid_thresholds(const Config& c) {
  RebootThresholds d;
  d.default_threshold = c.xid_reboot_threshold;
  d.overrides[94] = 1000;
  return parse_reboot_thresholds(c.xid_thresholds, d);
}

Result<RebootThresholds> sxid_thresholds(const Config& c) {
  RebootThresholds d;
  d.default_threshold = c.xid_reboot_threshold;
  return parse_reboot_thresholds(c.sxid_thresholds, d);
}

XidComponent::XidComponent(const ComponentContext& ctx) : Component(ctx) {
  auto t = xid_thresholds(*ctx.config);
  if (!t) logger(kXidComponent)->warn("{}; using the defaults", t.error().message);
  thresholds_ = t ? *t : RebootThresholds{2, {{94, 1000}}};
}

bool XidComponent::supported() const {
  return nvidia_kernel_log_supported(ctx(), kXidComponent, has_events_);
}

bool XidComponent::row_remapping() const {
  nvml::NvidiaSource* src = ctx().nvidia;
  if (src == nullptr || src->status() != nvml::NvmlStatus::kReady) return false;
  auto snap = src->snapshot();
  if (!snap || !*snap) return false;
  return caps_of(**snap).row_remapping;
}

CheckResult XidComponent::check() {
  const TimePoint now = Clock::now();
  const TimePoint since = lookback_start(ctx(), config().xid_lookback, now);
  std::vector<Event> events;
  if (auto ev = this->events(since, TimePoint::max()); ev) events = std::move(*ev);
  auto reboots = ctx().scan_mode ? std::vector<TimePoint>{} : reboot_times(ctx().events, since);
  ErrorVerdict v = evaluate_xid(events, reboots, thresholds_, row_remapping());
  return error_check_result(kXidComponent, v, "XIDComponent", events, now);
}

}  // namespace gpud::components
