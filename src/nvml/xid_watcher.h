// The Xid event watcher: registers every GPU for XidCriticalError events and delivers each event
// nvmlEventSetWait reports to a callback, from a thread of its own.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "core/result.h"
#include "nvml/loader.h"

namespace gpud::nvml {

struct XidEvent {
  uint64_t xid = 0;  // 999: an Xid the driver could not name
  unsigned int gpu_index = 0;
  std::string uuid;        // "" when unknown
  std::string pci_bus_id;  // normalised "0000:3b:00.0"
  std::chrono::system_clock::time_point time{};
};

// Why a thread of its own and not the NVML worker: nvmlEventSetWait blocks for its whole timeout
// when nothing happens. On the shared worker it would either delay every health check by that
// long or need a timeout so short that the loop spins. NVML is thread-safe, so the wait runs on
// the watcher's thread, while the set-up (create, register, identity) and the final free go
// through the worker under deadlines like every other call.
class XidWatcher {
 public:
  using Callback = std::function<void(const XidEvent&)>;

  static Result<std::unique_ptr<XidWatcher>> start(
      Nvml& nvml, Callback callback,
      std::chrono::milliseconds wait_timeout = std::chrono::milliseconds(500),
      std::chrono::milliseconds deadline = kDefaultCallDeadline);
  ~XidWatcher();  // stop()
  XidWatcher(const XidWatcher&) = delete;
  XidWatcher& operator=(const XidWatcher&) = delete;

  // After stop() returns the callback is never called again. A thread stuck in the driver is
  // detached (and the event set leaked) rather than waited for.
  void stop();

  struct State;

 private:
  XidWatcher(Nvml& nvml, std::shared_ptr<State> state) : nvml_(nvml), state_(std::move(state)) {}
  Nvml& nvml_;
  std::shared_ptr<State> state_;
};

}  // namespace gpud::nvml
