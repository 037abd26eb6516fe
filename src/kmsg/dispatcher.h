// KernelLogDispatcher: turns kernel-log records into stored events of the components that own
// them (one matcher, one deduper), counts them, and tells the caller which component to re-check.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>

#include "core/event_log.h"
#include "core/metrics.h"
#include "kmsg/deduper.h"
#include "kmsg/matchers.h"
#include "kmsg/record.h"

namespace gpud::kmsg {

inline constexpr std::string_view kEventsTotal = "gpud_kernel_log_events_total";
inline constexpr std::string_view kXidErrorsTotal = "accelerator_nvidia_xid_errors_total";
inline constexpr std::string_view kSxidErrorsTotal = "accelerator_nvidia_sxid_errors_total";
// The code of the latest Xid recorded per GPU (dcgm-exporter's DCGM_FI_DEV_XID_ERRORS is this
// value; PromQL cannot turn the counter's xid label into one).
inline constexpr std::string_view kXidLastCode = "accelerator_nvidia_xid_last_code";

// Builds the event a match becomes: time cut to the second (so a ring re-read after a restart
// yields the identical row), gpu_uuid added when known.
Event to_event(const Match& m, TimePoint t, std::string_view gpu_uuid = {});

// The match an NVML Xid event becomes: the same shape as the kernel-log one, source "nvml".
Match nvml_xid_match(int code, std::string_view pci_bus_id, std::string_view uuid);

// What the node knows of a PCI bus id named by a kernel-log line.
struct BusIdentity {
  bool known = false;  // one of this node's NVIDIA devices (NVML or sysfs lists it)
  std::string uuid;    // the GPU's UUID, when NVML has it
};

// The label a bus id gets on the per-GPU counters: only the node's own devices get their own
// series, so crafted lines naming random bus ids cannot grow /metrics without bound.
inline constexpr std::string_view kUnknownBusLabel = "unknown";

class KernelLogDispatcher {
 public:
  using OnEvent = std::function<void(std::string_view component)>;
  using Accept = std::function<bool(std::string_view component)>;
  using IdentifyBus = std::function<BusIdentity(std::string_view pci_bus_id)>;

  // `accept` (default: all) keeps events of components this process runs; `identify_bus`
  // (optional; without it every bus is unknown) says whether a bus id is one of the node's
  // devices and names its GPU.
  KernelLogDispatcher(EventLog& events, MetricRegistry& metrics, OnEvent on_event,
                      Accept accept = {}, IdentifyBus identify_bus = {});

  // Thread-safe. Returns the number of events stored (not deduplicated, not already stored).
  int feed(const KmsgRecord& record, TimePoint now = Clock::now());
  int feed(const KmsgRecordView& record, TimePoint now = Clock::now());
  int feed_message(std::string_view message, std::optional<TimePoint> time,
                   TimePoint now = Clock::now());
  // Stores one match (e.g. from NVML) through the same dedup, metrics and callback.
  int dispatch(const Match& m, TimePoint t);

  // False when no matcher can use this raw line (any prefix): the reader may skip parsing it.
  bool wants(std::string_view raw_line) const;

  uint64_t matched() const;  // matches seen, before dedup
  uint64_t stored() const;
  uint64_t parse_errors() const;  // records dropped because matching them threw

 private:
  int dispatch_locked(const Match& m, TimePoint t);
  void record_parse_error_locked(std::string_view message, std::string_view what);

  EventLog& events_;
  MetricRegistry& metrics_;
  OnEvent on_event_;
  Accept accept_;
  IdentifyBus identify_bus_;
  mutable std::mutex mu_;
  KernelLogMatcher matcher_;
  // matcher_.pending() as of the last feed, readable without mu_: wants() runs for every line of
  // a saved log and must not take a lock per line.
  std::atomic<bool> pending_{false};
  Deduper deduper_;
  uint64_t matched_ = 0;
  uint64_t stored_ = 0;
  uint64_t parse_errors_ = 0;
};

}  // namespace gpud::kmsg
