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

namespace nvml {
class NvidiaSource;
}
namespace components {
struct GpudProbes;
}

// What the daemon (or scan) hands every component. Pointers are never null once constructed by
// make_context(); tests point them at their own instances.
struct ComponentContext {
  const Config* config = nullptr;
  EventLog* events = nullptr;
  MetricRegistry* metrics = nullptr;
  bool scan_mode = false;  // one-shot `gpud scan`: no history beyond this run
  // An NVIDIA GPU is on the PCI bus (read once at start from sysfs), whether or not NVML loads.
  bool nvidia_pci_present = false;
  // `gpud scan --kernel-log FILE`: every component with a kernel-log matcher takes part, GPU or
  // not.
  bool kernel_log_scan = false;
  // The shared NVML instance and snapshot cache; null where NVIDIA components are not built (unit
  // tests).
  nvml::NvidiaSource* nvidia = nullptr;
  // What the `gpud` component watches (the daemon's store and kernel-log follower); null outside
  // the daemon, where that component is not supported.
  const components::GpudProbes* gpud = nullptr;
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
  virtual Result<std::vector<Event>> events(TimePoint since,
                                            TimePoint until) const;  // from EventLog
  virtual bool can_set_healthy() const { return false; }
  virtual Result<void> set_healthy();  // default: purge this component's events
  // Called once by the daemon before the first check (e.g. the os component records a reboot
  // event).
  virtual void start() {}

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
