#include "kmsg/event_pipeline.h"

#include <fmt/format.h>

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

EventPipeline::EventPipeline(std::vector<ComponentRules> rules, EventLog& events,
                             MetricRegistry& metrics, OnEvent on_event)
    : events_(events),
      metrics_(metrics),
      on_event_(std::move(on_event)),
      matcher_(std::move(rules)) {
  metrics_.describe(kEventsTotal, "Kernel-log events recorded, by component and event type",
                    MetricKind::kCounter);
  for (const ComponentRules& c : matcher_.rules())
    if (c.describe_metrics) c.describe_metrics(metrics_);
}

void EventPipeline::set_bus_identities(BusIdentityTable table) {
  std::lock_guard lock(mu_);
  buses_ = std::move(table);
}

int EventPipeline::feed(const KmsgRecord& r, TimePoint now) {
  return feed_message(r.message, r.time, now, r.boot_offset_us);
}

int EventPipeline::feed(const KmsgRecordView& r, TimePoint now) {
  return feed_message(r.message, r.time, now, r.boot_offset_us);
}

int EventPipeline::feed_message(std::string_view message, std::optional<TimePoint> time,
                                TimePoint now, std::optional<int64_t> boot_offset_us) {
  std::vector<Admitted> admitted;
  {
    std::lock_guard lock(mu_);
    if (boot_offset_us && (!latest_boot_offset_us_ || *boot_offset_us > *latest_boot_offset_us_))
      latest_boot_offset_us_ = boot_offset_us;
    // One record is the unit of failure: whatever a line does to a matcher or to the JSON it
    // builds, it is counted and dropped, and the next record is read as usual.
    try {
      std::vector<Match> ms = matcher_.feed(message);
      pending_.store(matcher_.pending(), std::memory_order_relaxed);
      for (const Match& m : ms)
        if (auto a = admit_locked(m, {time, boot_offset_us, now}))
          admitted.push_back(std::move(*a));
    } catch (const std::exception& e) {
      record_parse_error_locked(message, e.what());
      return 0;
    } catch (...) {
      record_parse_error_locked(message, "unknown exception");
      return 0;
    }
  }
  return store_all(admitted, message);
}

int EventPipeline::store_all(const std::vector<Admitted>& admitted, std::string_view message) {
  try {
    int n = 0;
    for (const Admitted& a : admitted) n += store(a);
    return n;
  } catch (const std::exception& e) {
    std::lock_guard lock(mu_);
    record_parse_error_locked(message, e.what());
  } catch (...) {
    std::lock_guard lock(mu_);
    record_parse_error_locked(message, "unknown exception");
  }
  return 0;
}

void EventPipeline::record_parse_error_locked(std::string_view message, std::string_view what) {
  ++parse_errors_;  // reported by the gpud component (gpud_kernel_log_parse_errors_total)
  // At most one line a minute: a flood of hostile lines must not flood the log too.
  if (auto left_out = parse_error_log_.admit())
    logger("kmsg")->warn(
        "kernel-log record skipped ({} so far, {} not logged since the last): {}: "
        "{:.200}",
        parse_errors_, *left_out, what, sanitize_utf8(message));
}

int EventPipeline::dispatch(const Match& m, TimePoint t) {
  std::vector<Admitted> admitted;
  {
    std::lock_guard lock(mu_);
    if (auto a = admit_locked(m, {t, std::nullopt, t})) admitted.push_back(std::move(*a));
  }
  return store_all(admitted, m.message);
}

BusIdentity EventPipeline::identify_locked(const Match& m) const {
  if (m.extra_info.contains("gpu_uuid"))  // NVML named the GPU itself
    return {true, m.extra_info.value("gpu_uuid", std::string())};
  const std::string bus = m.extra_info.value("pci_bus_id", std::string());
  return bus.empty() ? BusIdentity{} : buses_.identify(bus);
}

std::optional<EventPipeline::Admitted> EventPipeline::admit_locked(const Match& m,
                                                                   const RecordTime& when) {
  ++matched_;
  const ComponentRules* rules = nullptr;
  for (const ComponentRules& c : matcher_.rules())
    if (c.component == m.component) {
      rules = &c;
      break;
    }
  if (rules == nullptr) return std::nullopt;  // a component this process does not run
  // Repeats of a line are dropped only within the window of its own time: the wall clock, else
  // the offset since boot (a saved log of an unknown boot), else the reader's clock.
  const TimePoint own_time =
      when.wall             ? *when.wall
      : when.boot_offset_us ? TimePoint{} + std::chrono::duration_cast<Clock::duration>(
                                                std::chrono::microseconds(*when.boot_offset_us))
                            : when.now;
  BusIdentity id = identify_locked(m);
  if (keep_occurrences_) count_occurrence_locked(m, when, own_time, id.uuid);
  if (deduper_.is_duplicate(m.component, m.name, m.message, own_time)) return std::nullopt;
  Admitted a{m, rules, when, std::move(id), std::nullopt};
  if (auto w = watermarks_.find(m.component);
      w != watermarks_.end() && covers(w->second, {boot_id_, when.boot_offset_us, when.wall}))
    a.acknowledged = w->second.acknowledgement;
  return a;
}

int EventPipeline::store(const Admitted& a) {
  const Match& m = a.match;
  const std::string& uuid = a.bus.uuid;
  // The event keeps the raw bus id; only the counter's label is folded.
  const std::string bus_label =
      a.bus.known ? m.extra_info.value("pci_bus_id", std::string()) : std::string(kUnknownBusLabel);
  Match annotated;
  const Match* stored = &m;
  if (a.rules->annotate) {
    annotated = m;
    // The GPU the line is about, for an annotation that needs it (to_event adds the same key).
    if (!uuid.empty()) annotated.extra_info["gpu_uuid"] = uuid;
    a.rules->annotate(annotated, a.when);
    stored = &annotated;
  }
  Event e = to_event(*stored, a.when.wall.value_or(a.when.now), uuid);
  if (a.when.boot_offset_us)
    e.extra_info["boot_offset_seconds"] = static_cast<double>(*a.when.boot_offset_us) / 1e6;
  // Stored at the reader's time only because an event needs one; readers show it as unknown.
  if (!a.when.wall) e.extra_info["time_known"] = false;
  e.acknowledged = a.acknowledged;
  auto inserted = events_.insert(e);
  if (!inserted) {
    logger("kmsg")->warn("failed to store {} event {}: {}", m.component, m.name,
                         inserted.error().message);
    return 0;
  }
  if (!*inserted) return 0;  // already stored (ring buffer re-read after a restart)
  stored_.fetch_add(1, std::memory_order_relaxed);
  metrics_.add("", kEventsTotal, 1,
               {{"component", m.component}, {"type", std::string(to_string(m.type))}});
  if (a.rules->count) a.rules->count(metrics_, {m, uuid, bus_label});
  if (on_event_) on_event_(m.component);
  return 1;
}

void EventPipeline::count_occurrence_locked(const Match& m, const RecordTime& when,
                                            TimePoint own_time, std::string_view uuid) {
  // A companion line and the line of the fault it accompanies, in either order and this close,
  // are one occurrence (the driver prints both within the same second).
  constexpr auto kCompanionWindow = std::chrono::seconds(10);
  // Bounded: a log naming endless bus ids cannot grow the summary past this many rows.
  constexpr size_t kMaxOccurrenceKeys = 10000;
  const char* kind = m.extra_info.contains("xid")    ? "Xid"
                     : m.extra_info.contains("sxid") ? "SXid"
                                                     : nullptr;
  const std::string bus = m.extra_info.value("pci_bus_id", std::string());
  if (kind == nullptr || bus.empty()) return;
  const nlohmann::json& code_json = m.extra_info[kind[0] == 'X' ? "xid" : "sxid"];
  if (!code_json.is_number_integer()) return;
  const int code = code_json.get<int>();
  std::string key = fmt::format("{}\x1f{}\x1f{:011}\x1f{}", bus, kind, code, m.component);
  auto it = occurrences_.find(key);
  if (it == occurrences_.end()) {
    if (occurrences_.size() >= kMaxOccurrenceKeys) return;
    Occurrences o;
    o.component = m.component;
    o.kind = kind;
    o.code = code;
    o.pci_bus_id = bus;
    o.gpu_uuid = std::string(uuid);
    o.first_time = when.wall;
    o.first_boot_offset_us = when.boot_offset_us;
    it = occurrences_.emplace(std::move(key), std::move(o)).first;
  }
  Occurrences& o = it->second;
  LastCounted& last = last_counted_[it->first];
  // Times come from the log itself: any two are compared without overflow.
  int64_t apart = 0;
  const bool near = !__builtin_sub_overflow(own_time.time_since_epoch().count(),
                                            last.time.time_since_epoch().count(), &apart) &&
                    Clock::duration(apart) <= kCompanionWindow &&
                    Clock::duration(apart) >= -Clock::duration(kCompanionWindow);
  const bool pairs = o.count > 0 && !last.paired && last.companion != m.companion && near;
  if (pairs) {
    last.paired = true;
  } else {
    ++o.count;
    last = {m.companion, false, own_time};
  }
  o.last_time = when.wall;
  o.last_boot_offset_us = when.boot_offset_us;
}

void EventPipeline::keep_occurrences() {
  std::lock_guard lock(mu_);
  keep_occurrences_ = true;
}

std::vector<Occurrences> EventPipeline::occurrences() const {
  std::lock_guard lock(mu_);
  std::vector<Occurrences> out;
  out.reserve(occurrences_.size());
  for (const auto& [key, o] : occurrences_) out.push_back(o);
  return out;
}

void EventPipeline::set_boot_id(std::string boot_id) {
  std::lock_guard lock(mu_);
  boot_id_ = std::move(boot_id);
}

void EventPipeline::set_watermark(const std::string& component, KernelLogWatermark w) {
  std::lock_guard lock(mu_);
  watermarks_.insert_or_assign(component, std::move(w));
}

KernelLogWatermark EventPipeline::watermark_now(Acknowledgement ack) const {
  std::lock_guard lock(mu_);
  return {boot_id_, latest_boot_offset_us_, std::move(ack)};
}

bool EventPipeline::wants(std::string_view raw_line) const {
  return matcher_.may_match(raw_line) || pending_.load(std::memory_order_relaxed);
}

uint64_t EventPipeline::matched() const {
  std::lock_guard lock(mu_);
  return matched_;
}

uint64_t EventPipeline::parse_errors() const {
  std::lock_guard lock(mu_);
  return parse_errors_;
}

uint64_t EventPipeline::stored() const { return stored_.load(std::memory_order_relaxed); }

}  // namespace gpud::kmsg
