#include "kmsg/dispatcher.h"

#include <vector>

#include "core/log.h"
#include "kmsg/parser.h"

namespace gpud::kmsg {

Event to_event(const Match& m, TimePoint t, std::string_view gpu_uuid) {
  Event e;
  e.component = m.component;
  e.time = std::chrono::time_point_cast<std::chrono::seconds>(t);
  e.name = m.name;
  e.type = m.type;
  e.message = m.message;
  e.extra_info = m.extra_info.is_object() ? m.extra_info : nlohmann::json::object();
  if (!gpu_uuid.empty()) e.extra_info["gpu_uuid"] = std::string(gpu_uuid);
  return e;
}

KernelLogDispatcher::KernelLogDispatcher(std::vector<ComponentRules> rules, EventLog& events,
                                         MetricRegistry& metrics, OnEvent on_event, Accept accept,
                                         IdentifyBus identify_bus)
    : events_(events),
      metrics_(metrics),
      on_event_(std::move(on_event)),
      accept_(std::move(accept)),
      identify_bus_(std::move(identify_bus)),
      matcher_(std::move(rules)) {
  metrics_.describe(kEventsTotal, "Kernel-log events recorded, by component and event type",
                    MetricKind::kCounter);
  for (const ComponentRules& c : matcher_.rules())
    if (c.describe_metrics) c.describe_metrics(metrics_);
}

int KernelLogDispatcher::feed(const KmsgRecord& r, TimePoint now) {
  return feed_message(r.message, r.time, now);
}

int KernelLogDispatcher::feed(const KmsgRecordView& r, TimePoint now) {
  return feed_message(r.message, r.time, now);
}

int KernelLogDispatcher::feed_message(std::string_view message, std::optional<TimePoint> time,
                                      TimePoint now) {
  std::lock_guard lock(mu_);
  // One record is the unit of failure: whatever a line does to a matcher or to the JSON it builds,
  // it is counted and dropped, and the next record is read as usual.
  try {
    std::vector<Match> ms = matcher_.feed(message);
    pending_.store(matcher_.pending(), std::memory_order_relaxed);
    int n = 0;
    for (const Match& m : ms) n += dispatch_locked(m, time.value_or(now));
    return n;
  } catch (const std::exception& e) {
    record_parse_error_locked(message, e.what());
  } catch (...) {
    record_parse_error_locked(message, "unknown exception");
  }
  return 0;
}

void KernelLogDispatcher::record_parse_error_locked(std::string_view message,
                                                    std::string_view what) {
  ++parse_errors_;  // reported by the gpud component (gpud_kernel_log_parse_errors_total)
  // The first, then one in a thousand: a flood of hostile lines must not flood the log too.
  if (parse_errors_ == 1 || parse_errors_ % 1000 == 0)
    logger("kmsg")->warn("kernel-log record skipped ({} so far): {}: {:.200}", parse_errors_, what,
                         sanitize_utf8(message));
}

int KernelLogDispatcher::dispatch(const Match& m, TimePoint t) {
  std::lock_guard lock(mu_);
  return dispatch_locked(m, t);
}

int KernelLogDispatcher::dispatch_locked(const Match& m, TimePoint t) {
  ++matched_;
  if (accept_ && !accept_(m.component)) return 0;
  if (deduper_.is_duplicate(m.component, m.name, m.message, t)) return 0;
  const std::string bus = m.extra_info.value("pci_bus_id", std::string());
  BusIdentity id;
  if (m.extra_info.contains("gpu_uuid")) {  // NVML named the GPU itself
    id.known = true;
    id.uuid = m.extra_info.value("gpu_uuid", std::string());
  } else if (identify_bus_ && !bus.empty()) {
    id = identify_bus_(bus);
  }
  const std::string& uuid = id.uuid;
  // The event keeps the raw bus id; only the counter's label is folded.
  const std::string bus_label = id.known ? bus : std::string(kUnknownBusLabel);
  Event e = to_event(m, t, uuid);
  auto inserted = events_.insert(e);
  if (!inserted) {
    logger("kmsg")->warn("failed to store {} event {}: {}", m.component, m.name,
                         inserted.error().message);
    return 0;
  }
  if (!*inserted) return 0;  // already stored (ring buffer re-read after a restart)
  ++stored_;
  metrics_.add("", kEventsTotal, 1,
               {{"component", m.component}, {"type", std::string(to_string(m.type))}});
  for (const ComponentRules& c : matcher_.rules())
    if (c.component == m.component && c.count) c.count(metrics_, {m, uuid, bus_label});
  if (on_event_) on_event_(m.component);
  return 1;
}

bool KernelLogDispatcher::wants(std::string_view raw_line) const {
  return matcher_.may_match(raw_line) || pending_.load(std::memory_order_relaxed);
}

uint64_t KernelLogDispatcher::matched() const {
  std::lock_guard lock(mu_);
  return matched_;
}

uint64_t KernelLogDispatcher::parse_errors() const {
  std::lock_guard lock(mu_);
  return parse_errors_;
}

uint64_t KernelLogDispatcher::stored() const {
  std::lock_guard lock(mu_);
  return stored_;
}

}  // namespace gpud::kmsg
