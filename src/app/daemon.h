// Daemon: wires the store, components, scheduler, metric sampling, retention and the API for `gpud
// run`.
#pragma once

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "app/kubeconfig.h"
#include "app/runtime.h"
#include "components/nvidia/gpu_health.h"
#include "components/self/gpud.h"
#include "core/config.h"
#include "core/registry.h"
#include "core/scheduler.h"
#include "kmsg/event_pipeline.h"
#include "kmsg/reader.h"
#include "nvml/xid_watcher.h"
#include "server/metrics_listener.h"
#include "server/server.h"
#include "sinks/kubernetes_node_conditions.h"
#include "store/metadata.h"
#include "store/metric_store.h"

namespace gpud::app {

class Daemon {
 public:
  explicit Daemon(Config config, KubernetesSettings kubernetes = {});
  ~Daemon();
  // Opens the store (taking the data dir's lock), registers and starts components, starts the API.
  Result<void> start();
  // Stops everything; bounded (the scheduler waits for running checks only).
  void stop();
  int port() const;
  // Whether the API listener also serves the web UI at / (default on); call before start().

  // One pass of the background housekeeping: sample metrics into history, enforce retention.
  void housekeeping(TimePoint now);
  // NVML opened late (a slow init) or loaded after a retry: a check of every component now;
  // NVML's first answer: machine info and the Xid watcher. Retries a missing or failed NVML.
  void watch_nvidia();
  // Each GPU's health over the components' latest states (GET /v1/gpus, the per-GPU metric), read
  // in place (Scheduler::read_last_states); `values`: with each component's row of the GPU.
  std::vector<components::GpuHealth> gpu_health(components::GpuValues values) const;
  // Every supported component's latest states, from the scheduler's cache.
  std::vector<HealthState> latest_states() const;

 private:
  void loop();
  // Loads --plugin-specs-file and registers a component per plugin.
  Result<void> register_custom_plugins();
  // Runs the init plugins once; an error (naming the plugin and why) when one is not Healthy.
  Result<void> run_init_plugins();
  // With --kubernetes-node-conditions: the sink, from the kubeconfig or service account.
  Result<void> make_node_conditions();
  void start_kernel_log();
  components::KernelLogCounters kernel_log_counters();
  void maybe_start_xid_watcher();
  // Hands the event pipeline the node's bus ids and GPU UUIDs when NVML's last good snapshot
  // changed, or sysfs's NVIDIA devices (re-read every kSysfsDevicesRescan) did.
  void refresh_bus_identities(TimePoint now);
  nlohmann::json machine_info();

  Config config_;
  KubernetesSettings kubernetes_;
  int lock_fd_ = -1;
  // The store, metric registry, NVIDIA source, components and event pipeline, as `gpud scan`
  // builds them too.
  std::unique_ptr<Runtime> runtime_;
  std::unique_ptr<store::MetricStore> history_;
  std::unique_ptr<Scheduler> scheduler_;
  std::unique_ptr<server::Server> server_;
  std::unique_ptr<server::MetricsListener> metrics_listener_;
  // Guards follower_ and kernel_log_error_ against the gpud component's check, which the scheduler
  // may run while start_kernel_log() sets them.
  std::mutex kernel_log_mu_;
  std::unique_ptr<kmsg::KmsgFollower> follower_;
  std::string kernel_log_error_;
  std::unique_ptr<nvml::XidWatcher> xid_watcher_;
  // --kubernetes-node-conditions; made before the runtime (the gpud component reads its status)
  // and started once the first checks ran.
  std::unique_ptr<sinks::KubernetesNodeConditions> node_conditions_;
  std::vector<std::string> init_plugins_;  // component names, in the specs file's order

  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::thread loop_thread_;
  nlohmann::json machine_info_;
  TimePoint machine_info_at_{};
  bool nvidia_expected_ = false;  // NVIDIA GPUs on the PCI bus, or --gpu-count > 0
  bool nvml_seen_ready_ = false;  // NVML was seen initialised
  // NVML answered a collection: machine info has the GPUs, the Xid watcher is started.
  bool nvidia_ready_ = false;
  // Set by NVML's on_answer (a collection ended after a check was told "not answering"): the loop
  // re-checks the NVIDIA components and fills machine info now.
  bool nvidia_answered_ = false;  // guarded by mu_
  // Counts the store's failed operations (guarded by mu_): a new one wakes the loop, which retries
  // what waits for the store, then every kStoreRetryInterval while events wait or it is unusable.
  uint64_t store_failures_ = 0;
  TimePoint last_retention_{};
  // What refresh_bus_identities read last (start() before the loop, then only the loop): NVIDIA
  // devices in sysfs, NVML's snapshot, and the table the pipeline was handed from them.
  std::vector<std::string> sysfs_nvidia_devices_;
  TimePoint sysfs_nvidia_devices_at_{};
  std::shared_ptr<const nvml::NvmlSnapshot> bus_identities_snapshot_;
  kmsg::BusIdentityTable bus_identities_;
};

// How often the daemon retries events that wait for the store (a full disk, a replaced database),
// and looks at NVML while it is opening, missing or has not answered a first collection. With the
// store well and NVML settled the loop sleeps until the next history sample, or until woken (a
// failed store operation, NVML answering after a hang).
inline constexpr std::chrono::seconds kStoreRetryInterval{5};
// How long start() waits for NVML (its init and first collection) before following the kernel log
// and serving: a driver that answers by then has its GPUs in /machine-info and names the GPUs of
// the ring's Xid lines from the start; one that does not delays /healthz by this much at most.
inline constexpr std::chrono::milliseconds kNvmlStartWait{500};
// How long an NVIDIA check waits for a collection in progress before it says "not checked: NVML
// is not answering" (the collection goes on to its deadline): the scheduler's workers stay free
// for the other components while a driver hangs.
inline constexpr std::chrono::milliseconds kNvmlAnswerWait{1000};
// How long start() waits for the container runtimes' first listing (components::checked_first())
// before the other components' first checks and the kernel log go ahead without it.
inline constexpr std::chrono::seconds kFirstChecksWait{3};
// How often the NVIDIA devices in sysfs are listed again for the kernel log's bus ids (a device
// NVML does not list, e.g. a GPU fallen off the bus, is still one of the node's).
inline constexpr std::chrono::minutes kSysfsDevicesRescan{1};
// How often a missing or failed NVML is tried again: where NVIDIA GPUs are expected, and not.
inline constexpr std::chrono::seconds kNvmlRetryExpected{30};
inline constexpr std::chrono::seconds kNvmlRetry{300};
// Samples the history's insert takes at a time (each chunk a transaction of its own).
inline constexpr size_t kHistoryChunkSamples = 64;

// Creates the data dir with mode 0700 when it is missing (its files hold the node's job names and
// pids); a directory that exists keeps the mode its owner gave it (0700, 1777, ...).
Result<void> ensure_data_dir(const std::string& data_dir);

// Takes an exclusive lock on <data_dir>/gpud.lock; returns the fd, or an error naming the holder
// when another gpud holds it. `gpud compact` uses the same lock to refuse while the daemon runs.
Result<int> lock_data_dir(const std::string& data_dir);

}  // namespace gpud::app
