// Component: the contract every health checker implements, and the dependencies it is given.
#pragma once

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "core/config.h"
#include "core/event_log.h"
#include "core/health.h"
#include "core/metrics.h"
#include "core/result.h"

namespace gpud {

// What the daemon (or scan) hands every component, as far as the component framework needs it;
// the components layer extends it with what its components read (components/component.h). The
// daemon and scan set every pointer; unit tests may leave events and metrics null.
struct ComponentContext {
  const Config* config = nullptr;
  EventLog* events = nullptr;
  MetricRegistry* metrics = nullptr;
  bool scan_mode = false;  // one-shot `gpud scan`: no history beyond this run
};

class Component {
 public:
  explicit Component(const ComponentContext& ctx) : ctx_(ctx) {}
  virtual ~Component() = default;
  Component(const Component&) = delete;
  Component& operator=(const Component&) = delete;

  virtual std::string_view name() const = 0;       // e.g. "cpu"
  virtual std::vector<std::string> tags() const;   // default: {name}
  virtual bool supported() const { return true; }  // false: hidden from the API, skipped by scan
  virtual std::chrono::seconds interval() const {
    return std::chrono::seconds(60);
  }                                 // 0: on demand
  virtual CheckResult check() = 0;  // one bounded synchronous check
  // From EventLog, acknowledged ones included (a rule filters them with unacknowledged()).
  virtual Result<std::vector<Event>> events(TimePoint since, TimePoint until) const;
  virtual bool can_set_healthy() const { return false; }
  // Forgets past failures. Default: marks this component's events acknowledged by `ack` (kept for
  // the timeline; the rules skip them).
  virtual Result<void> set_healthy(const Acknowledgement& ack);
  // Called once by the daemon before the first check (e.g. the os component records a reboot
  // event).
  virtual void start() {}
  // false: never checked at start nor on an interval, only when triggered (a manual custom plugin).
  virtual bool scheduled() const { return true; }
  // Whether DELETE /v1/components may remove it while the daemon runs (custom plugins only).
  virtual bool can_deregister() const { return false; }
  // Called once when it was deregistered: stop work in flight and drop its own metric series. The
  // object lives on (Registry::retire), so a check or request that still holds it finishes safely.
  virtual void deregistered() {}

 protected:
  const ComponentContext& ctx() const { return ctx_; }
  const Config& config() const { return *ctx_.config; }
  // Records an event for this component (deduplicated by the store); logs and drops on store
  // failure.
  void record(Event e) const;

 private:
  ComponentContext ctx_;
};

}  // namespace gpud
