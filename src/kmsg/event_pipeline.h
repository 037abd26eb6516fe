// EventPipeline: the one path from the kernel log and NVML's event stream to the store. It runs
// the components' kernel-log rules over the records (one matcher, one deduper), names each bus
// id's GPU from the BusIdentityTable it was handed, stores the events, counts them, and tells the
// caller which component to re-check. Under its lock it runs only the rules' matchers and its own
// bookkeeping on data it holds: the rules' annotations, the store, the counters and the
// caller's on_event run after the lock is released.
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
#include "kmsg/bus_identity_table.h"
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

class EventPipeline {
 public:
  using OnEvent = std::function<void(std::string_view component)>;

  // `rules`: the kernel-log rules of the components this process runs
  // (components::kernel_log_rules); only their owners' events are kept, those of a match made
  // elsewhere (dispatch) included. `on_event` (optional) hears of each stored event's component,
  // after the lock is released. Until set_bus_identities, every bus is unknown.
  EventPipeline(std::vector<ComponentRules> rules, EventLog& events, MetricRegistry& metrics,
                OnEvent on_event = {});

  // Replaces the table the next lines' bus ids are named from (the caller refreshes it when
  // NVML's snapshot or sysfs changes).
  void set_bus_identities(BusIdentityTable table);

  // Thread-safe. Returns the number of events stored (not deduplicated, not already stored).
  int feed(const KmsgRecord& record, TimePoint now = Clock::now());
  int feed(const KmsgRecordView& record, TimePoint now = Clock::now());
  int feed_message(std::string_view message, std::optional<TimePoint> time,
                   TimePoint now = Clock::now(), std::optional<int64_t> boot_offset_us = {});
  // Stores one match (e.g. an Xid NVML reported) through the same dedup, metrics and on_event;
  // dropped unless m.component is one of the rules' owners.
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
  // A match the lock's bookkeeping let through (not a repeat, of a component that runs), with
  // what it was decided from; stored by store() once the lock is released.
  struct Admitted {
    Match match;
    const ComponentRules* rules = nullptr;
    RecordTime when;
    BusIdentity bus;
    std::optional<Acknowledgement> acknowledged;
  };
  std::optional<Admitted> admit_locked(const Match& m, const RecordTime& when);
  int store(const Admitted& a);
  // Stores what was admitted for one record; a throw is counted as that record's parse error.
  int store_all(const std::vector<Admitted>& admitted, std::string_view message);
  BusIdentity identify_locked(const Match& m) const;
  void count_occurrence_locked(const Match& m, const RecordTime& when, TimePoint own_time,
                               std::string_view uuid);
  void record_parse_error_locked(std::string_view message, std::string_view what);

  EventLog& events_;
  MetricRegistry& metrics_;
  OnEvent on_event_;
  mutable std::mutex mu_;
  RuleMatcher matcher_;
  BusIdentityTable buses_;
  // matcher_.pending() as of the last feed, readable without mu_: wants() runs for every line of
  // a saved log and must not take a lock per line.
  std::atomic<bool> pending_{false};
  Deduper deduper_;
  uint64_t matched_ = 0;
  std::atomic<uint64_t> stored_{0};  // counted by store(), outside the lock
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
