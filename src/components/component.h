// The Component and ComponentContext of gpud's own components: core's, plus what they read beyond
// it (the NVIDIA source, whether an NVIDIA GPU is on the bus, a saved-log scan, the gpud
// component's probes). Inside namespace gpud::components, `Component` and `ComponentContext` name
// these, so every component header includes this file rather than core/component.h.
#pragma once

#include "core/component.h"

namespace gpud {

namespace nvml {
class NvidiaSource;
}
namespace kmsg {
struct Match;
struct MatchTime;
}  // namespace kmsg
namespace runtimes {
class ContainerDirectory;
class ContainerSource;
}  // namespace runtimes

namespace components {

struct GpudProbes;

struct ComponentContext : gpud::ComponentContext {
  // An NVIDIA GPU is on the PCI bus (read once at start from sysfs), whether or not NVML loads.
  bool nvidia_pci_present = false;
  // `gpud scan --kernel-log FILE`: every component with kernel-log rules takes part, GPU or
  // not.
  bool kernel_log_scan = false;
  // The shared NVML instance and snapshot cache; null where NVIDIA components are not built (unit
  // tests).
  nvml::NvidiaSource* nvidia = nullptr;
  // What the `gpud` component watches (the daemon's store and kernel-log follower); null outside
  // the daemon, where that component is not supported.
  const GpudProbes* gpud = nullptr;
  // What the container runtimes last listed, as the GPU process and Xid attribution read it (no
  // component writes it). Null in unit tests that do not need it.
  const runtimes::ContainerDirectory* containers = nullptr;
  // What the container-runtime components list through (it keeps `containers`). Null in unit
  // tests: each such component then lists through a source of its own that nothing reads.
  runtimes::ContainerSource* container_source = nullptr;
};

class Component : public gpud::Component {
 public:
  explicit Component(const ComponentContext& ctx) : gpud::Component(ctx), ctx_(ctx) {}

  // Adds to one of its kernel-log events, as the line is read, what the node knows now (the Xid's
  // process to its container and pod); the registry hands it to the event pipeline as the rules'
  // `annotate`. Default: nothing.
  virtual bool annotates_kernel_log() const { return false; }
  virtual void annotate_kernel_log_match(kmsg::Match& /*m*/, const kmsg::MatchTime& /*t*/) const {}

 protected:
  const ComponentContext& ctx() const { return ctx_; }

 private:
  // The whole context; gpud::Component keeps its own copy of the core part, and neither changes.
  ComponentContext ctx_;
};

}  // namespace components
}  // namespace gpud
