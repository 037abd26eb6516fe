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

Match nvml_xid_match(int code, std::string_view pci_bus_id, std::string_view uuid) {
  // The same shape and message as the kernel line of the same Xid, so the deduper makes the two
  // one event.
  Match m = make_xid_match(code, pci_bus_id.empty() ? "0000:00:00.0" : pci_bus_id, "");
  m.extra_info["source"] = "nvml";
  if (!uuid.empty()) m.extra_info["gpu_uuid"] = std::string(uuid);
  return m;
}

KernelLogDispatcher::KernelLogDispatcher(EventLog& events, MetricRegistry& metrics,
                                         OnEvent on_event, Accept accept, IdentifyBus identify_bus)
    : events_(events),
      metrics_(metrics),
      on_event_(std::move(on_event)),
      accept_(std::move(accept)),
      identify_bus_(std::move(identify_bus)) {
  metrics_.describe(kEventsTotal, "Kernel-log events recorded, by component and event type",
                    MetricKind::kCounter);
  metrics_.describe(kXidErrorsTotal, "NVIDIA Xid errors recorded, by GPU and code",
                    MetricKind::kCounter);
  metrics_.describe(kXidLastCode,
                    "Code of the latest NVIDIA Xid error recorded on each GPU since gpud started");
  metrics_.describe(kSxidErrorsTotal, "NVIDIA NVSwitch SXid errors recorded, by switch and code",
                    MetricKind::kCounter);
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
  // `type` is the event's own type (the catalog's, or the decoded NVLink Xid 144-150 severity), so
  // that an alert on fatal Xids needs no list of codes.
  if (m.component == kComponentXid && m.extra_info.contains("xid")) {
    const int code = m.extra_info.value("xid", 0);
    metrics_.add(m.component, kXidErrorsTotal, 1,
                 {{"uuid", uuid},
                  {"pci_bus_id", bus_label},
                  {"xid", std::to_string(code)},
                  {"type", std::string(to_string(m.type))}});
    metrics_.set(m.component, kXidLastCode, code, {{"uuid", uuid}, {"pci_bus_id", bus_label}});
  } else if (m.component == kComponentSxid && m.extra_info.contains("sxid")) {
    metrics_.add(m.component, kSxidErrorsTotal, 1,
                 {{"uuid", uuid},
                  {"pci_bus_id", bus_label},
                  {"sxid", std::to_string(m.extra_info.value("sxid", 0))},
                  {"type", std::string(to_string(m.type))}});
  }
  if (on_event_) on_event_(m.component);
  return 1;
}

bool KernelLogDispatcher::wants(std::string_view raw_line) const {
  return may_match(raw_line) || pending_.load(std::memory_order_relaxed);
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
