// Helpers the kernel-log components share: who takes part, the reboot history, a summary of
// recent kernel-log events, and the base of the components that only list their events.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "components/component.h"
#include "core/event_digest.h"
#include "kmsg/rules.h"

namespace gpud::components {

// What a kernel-log rule concludes.
struct KernelLogVerdict {
  Health health = Health::kHealthy;
  std::string reason = "ok";
  std::optional<SuggestedActions> actions;
};

// Folds a kernel-log verdict into a snapshot rule's single-state result: the worse health wins,
// reasons are joined, actions merged.
void merge_verdict(CheckResult& r, const KernelLogVerdict& v);

// How many events a listing component (memory, cpu, os, peermem, nccl) lists in extra_info
// "kernel_log_events": the newest; the summary counts them all.
inline constexpr size_t kListedKernelLogEvents = 20;

// What a listing component says of its kernel-log events, in memory bounded by the kinds of
// event, not by their number (a tenant's job can print an OOM kill every second for the whole
// retention): how many of each name, the newest one's message and the newest
// kListedKernelLogEvents events (newest first). Acknowledged events are left out.
struct KernelLogSummary {
  uint64_t total = 0;
  std::map<std::string, uint64_t> by_name;
  std::string latest_message;
  std::vector<Event> newest;
};
// The summary of the events of `component` with time > since whose name is one of `names` (every
// name when empty), or the store's error. The store digests the range without reading it into
// memory.
[[nodiscard]] Result<KernelLogSummary> kernel_log_summary(
    const ComponentContext& ctx, std::string_view component, TimePoint since,
    const std::vector<std::string>& names = {});
// The summary of events already in memory (newest first or in any order).
KernelLogSummary summary_of(const std::vector<Event>& events);

// Appends summarize() to the first state's reason and lists the summary's newest events in
// extra_info "kernel_log_events" (health unchanged).
void append_event_summary(CheckResult& r, const KernelLogSummary& summary);
// Appends the summary of the component's kernel-log events of the events retention whose name is
// one of `names` (all without them) to the first state (append_event_summary), or merges
// unreadable_history when the store cannot give them.
void append_kernel_log_events(CheckResult& r, const ComponentContext& ctx,
                              std::string_view component,
                              const std::vector<std::string>& names = {});

// This component's events with time > since (newest first) that set-healthy has not
// acknowledged, or the store's error: a failed read is reported (unreadable_history), never taken
// for "no events".
[[nodiscard]] Result<std::vector<Event>> component_events(const ComponentContext& ctx,
                                                          std::string_view component,
                                                          TimePoint since);

// A component's kernel-log events (time > since, newest first) and the host's reboots after
// `since` (none in scan mode: a saved log's reboots are not this host's), or the store's error.
struct KernelLogHistory {
  std::vector<Event> events;
  std::vector<TimePoint> reboots;
};
[[nodiscard]] Result<KernelLogHistory> kernel_log_history(const ComponentContext& ctx,
                                                          std::string_view component,
                                                          TimePoint since);

// What a reboot-aware error rule (Xid, SXid) reads of a long history, in memory bounded by its
// distinct kinds of error, not by their number: the events digested on `key_paths` and split at
// the reboots, the newest `newest_limit` events (newest first) and the reboots after `since`
// (none in scan mode), or the store's error.
struct KernelLogDigest {
  EventDigest digest;
  std::vector<Event> newest;
  std::vector<TimePoint> reboots;
};
[[nodiscard]] Result<KernelLogDigest> kernel_log_digest(const ComponentContext& ctx,
                                                        std::string_view component, TimePoint since,
                                                        const std::vector<std::string>& key_paths,
                                                        size_t newest_limit);

// The failures of each event name that no reboot resolved (evaluate_suggested_actions over the
// name's times), each as "<its newest message> (Nx)" with its action, sorted by reason. `events`
// in any order; counts[i], when given, is how many events events[i] stands for (a digest's group).
struct UnresolvedFailures {
  std::vector<std::string> reasons;
  std::vector<RepairAction> actions;
};
UnresolvedFailures unresolved_failures(const std::vector<const Event*>& events,
                                       const std::vector<TimePoint>& reboots,
                                       const std::vector<uint64_t>& counts = {});

// What a component says when the store cannot give its history: Unhealthy, with the error.
KernelLogVerdict unreadable_history(const Error& e);

// Whether `component` has a kernel-log event in the store; latches `has_events` once true.
bool has_recorded_events(const ComponentContext& ctx, std::string_view component,
                         std::atomic<bool>& has_events);

// NVIDIA kernel-log components take part when a saved log is scanned, an NVIDIA GPU is on the
// bus, NVML loaded, or they already have events (an Xid line proves an NVIDIA driver). The event
// test latches once true.
bool nvidia_kernel_log_supported(const ComponentContext& ctx, std::string_view component,
                                 std::atomic<bool>& has_events);

// Times of the os component's "reboot" events with time > since, or the store's error.
[[nodiscard]] Result<std::vector<TimePoint>> reboot_times(const EventLog* log, TimePoint since);

// How far back the kernel-log rules look: everything in scan mode, else `lookback` (0: the events
// retention).
TimePoint lookback_start(const ComponentContext& ctx, std::chrono::seconds lookback, TimePoint now);

// "3 kernel-log events (2 OOM, 1 cpu_soft_lockup), latest: <message>"; "" when none.
std::string summarize(const KernelLogSummary& summary);
std::string summarize_events(const std::vector<Event>& events);

// A component whose kernel-log events are listed but never change its health (GPUd's peermem,
// nccl and infiniband kernel-log behaviour).
class KernelLogEventsComponent : public Component {
 public:
  KernelLogEventsComponent(const ComponentContext& ctx, std::string name,
                           std::vector<std::string> tags);
  std::string_view name() const override { return name_; }
  std::vector<std::string> tags() const override { return tags_; }
  bool supported() const override;
  CheckResult check() override;
  bool can_set_healthy() const override { return true; }

 private:
  std::string name_;
  std::vector<std::string> tags_;
  mutable std::atomic<bool> has_events_{false};
};

}  // namespace gpud::components
