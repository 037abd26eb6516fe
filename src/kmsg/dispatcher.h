// KernelLogDispatcher: runs the components' kernel-log rules over the records, stores the events
// they make (one matcher, one deduper), counts them, and tells the caller which component to
// re-check.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "core/acknowledgement.h"
#include "core/event_log.h"
#include "core/log.h"
#include "core/metrics.h"
#include "kmsg/deduper.h"
#include "kmsg/record.h"
#include "kmsg/rules.h"

namespace gpud::kmsg {

inline constexpr std::string_view kEventsTotal = "gpud_kernel_log_events_total";

// Builds the event a match becomes: time cut to the second (so a ring re-read after a restart
// yields the identical row), gpu_uuid added when known.
Event to_event(const Match& m, TimePoint t, std::string_view gpu_uuid = {});

// Every occurrence of one Xid or SXid code on one device, repeats the deduper drops included:
// what a post-mortem summarises per GPU. First and last are in the log's order.
struct Occurrences {
  std::string component;
  std::string kind;  // "Xid" or "SXid"
  int code = 0;
  std::string pci_bus_id;
  std::string gpu_uuid;  // when the node knows the bus
  uint64_t count = 0;
  std::optional<TimePoint> first_time, last_time;  // wall clock, when the line gave one
  std::optional<int64_t> first_boot_offset_us, last_boot_offset_us;
};

// When a record happened, as far as its line says (`now`: the reader's clock, for records with
// neither).
using RecordTime = MatchTime;

class KernelLogDispatcher {
 public:
  using OnEvent = std::function<void(std::string_view component)>;
  using Accept = std::function<bool(std::string_view component)>;
  using IdentifyBus = std::function<BusIdentity(std::string_view pci_bus_id)>;

  // `rules`: every component's kernel-log rules (components::kernel_log_rules); `accept`
  // (default: all) keeps events of components this process runs; `identify_bus` (optional;
  // without it every bus is unknown) says whether a bus id is one of the node's devices and names
  // its GPU.
  KernelLogDispatcher(std::vector<ComponentRules> rules, EventLog& events, MetricRegistry& metrics,
                      OnEvent on_event, Accept accept = {}, IdentifyBus identify_bus = {});

  // Thread-safe. Returns the number of events stored (not deduplicated, not already stored).
  int feed(const KmsgRecord& record, TimePoint now = Clock::now());
  int feed(const KmsgRecordView& record, TimePoint now = Clock::now());
  int feed_message(std::string_view message, std::optional<TimePoint> time,
                   TimePoint now = Clock::now(), std::optional<int64_t> boot_offset_us = {});
  // Stores one match (e.g. an Xid NVML reported) through the same dedup, metrics and callback;
  // m.component must be one of the rules' owners for its counters to be kept.
  int dispatch(const Match& m, TimePoint t);

  // The boot being read (its id, "" when unknown), which the watermarks' rule compares with.
  void set_boot_id(std::string boot_id);
  // What set-healthy acknowledged of a component: from now on a record at or before it (covers())
  // is stored already acknowledged, so a ring re-read after a restart is not a fault again.
  void set_watermark(const std::string& component, KernelLogWatermark w);
  // A watermark made now: this boot, and the newest record read so far.
  KernelLogWatermark watermark_now(Acknowledgement ack) const;

  // False when no kernel-log rule can use this raw line (any prefix): the reader may skip parsing
  // it.
  bool wants(std::string_view raw_line) const;
  // The same for a saved-log reader that looks at many lines at once (ReadOptions::want_keywords
  // and want_every_line): the rules' literals, and whether a multi-line rule is open.
  const std::vector<Literal>& literals() const { return matcher_.literals(); }
  bool pending() const { return pending_.load(std::memory_order_relaxed); }

  uint64_t matched() const;  // matches seen, before dedup
  uint64_t stored() const;
  uint64_t parse_errors() const;  // records dropped because matching them threw

  // Counts every Xid/SXid occurrence per device from now on (`gpud scan`; bounded in keys).
  void keep_occurrences();
  // Sorted by bus id, kind and code.
  std::vector<Occurrences> occurrences() const;

 private:
  int dispatch_locked(const Match& m, const RecordTime& when);
  void count_occurrence_locked(const Match& m, const RecordTime& when, TimePoint own_time,
                               std::string_view uuid);
  void record_parse_error_locked(std::string_view message, std::string_view what);

  EventLog& events_;
  MetricRegistry& metrics_;
  OnEvent on_event_;
  Accept accept_;
  IdentifyBus identify_bus_;
  mutable std::mutex mu_;
  RuleMatcher matcher_;
  // matcher_.pending() as of the last feed, readable without mu_: wants() runs for every line of
  // a saved log and must not take a lock per line.
  std::atomic<bool> pending_{false};
  Deduper deduper_;
  uint64_t matched_ = 0;
  uint64_t stored_ = 0;
  uint64_t parse_errors_ = 0;
  LogRateLimiter parse_error_log_{std::chrono::minutes(1)};
  bool keep_occurrences_ = false;
  std::string boot_id_;
  std::optional<int64_t> latest_boot_offset_us_;  // of any record fed, matched or not
  std::map<std::string, KernelLogWatermark, std::less<>> watermarks_;
  std::map<std::string, Occurrences> occurrences_;
  // Per occurrence key: the latest line counted, for pairing a companion line with its fault.
  struct LastCounted {
    bool companion = false;
    bool paired = false;
    TimePoint time;
  };
  std::map<std::string, LastCounted, std::less<>> last_counted_;
};

}  // namespace gpud::kmsg
