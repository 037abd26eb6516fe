// Runtime: what `gpud run` and `gpud scan` both wire, built in one place so that the two cannot
// drift: the state database and its event store, the metric registry, the NVIDIA source, the
// components with their context, and the event pipeline (kernel log and NVML events to the store).
#pragma once

#include <functional>
#include <memory>

#include "components/self/gpud.h"
#include "core/config.h"
#include "core/metrics.h"
#include "core/registry.h"
#include "kmsg/event_pipeline.h"
#include "nvml/source.h"
#include "runtimes/container_directory.h"
#include "runtimes/container_source.h"
#include "store/database.h"
#include "store/event_store.h"

namespace gpud::app {

enum class RuntimeMode {
  // `gpud run`: the database in the data dir (or in memory with --db-in-memory), counting its
  // operations in the metric registry; the gpud component watches it.
  kDaemon,
  // `gpud scan`: the database in memory; components in scan mode, and every kernel-log component
  // takes part when saved logs are scanned.
  kScan,
};

// What only the daemon hands the runtime; `gpud scan` leaves them empty.
struct DaemonHooks {
  kmsg::EventPipeline::OnEvent on_kernel_log_event;  // a component got a kernel-log event
  std::function<components::KernelLogCounters()> kernel_log_counters;  // for the gpud component
  std::function<std::vector<components::SinkStatus>()> sinks;          // for the gpud component
};

// Members are declared so that each is destroyed before what it points at. Not movable: the
// components and the pipeline point at its members.
struct Runtime {
  Runtime() = default;
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  MetricRegistry metrics;
  std::unique_ptr<store::Database> db;
  std::unique_ptr<store::EventStore> events;
  std::unique_ptr<nvml::NvidiaSource> nvidia;  // opened
  bool nvidia_pci_present = false;             // NVIDIA GPUs in sysfs, read once at build
  components::GpudProbes gpud_probes;          // what the gpud component reads (daemon only)
  runtimes::ContainerDirectory containers;     // what the container runtimes listed
  std::unique_ptr<runtimes::ContainerSource> container_source;  // lists into containers
  Registry registry;                              // the components config.components enables
  std::unique_ptr<kmsg::EventPipeline> pipeline;  // stores into events, for registry
};

// Opens the database, loads NVML and registers the components. The daemon takes the data dir's
// lock first; `config` must outlive the runtime (every component points at it).
Result<std::unique_ptr<Runtime>> build_runtime(const Config& config, RuntimeMode mode,
                                               DaemonHooks hooks = {});

}  // namespace gpud::app
