// KubernetesNodeConditions: keeps gpud's conditions on its own Node's status (GpudGPUProblem,
// GpudKernelProblem, GpudRuntimeProblem; "True" while there is a problem, as node-problem-detector
// and NVSentinel write theirs) and records each transition as a Kubernetes Event on the Node. It
// reads the same typed findings /v1/gpus serves and the components' cached states, writes on
// transitions only (plus a slow resync), rate-limited and with backoff while the API server is
// away, on a thread of its own: it never runs or waits for a check.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "components/nvidia/gpu_health.h"
#include "components/self/gpud.h"
#include "core/health.h"
#include "core/log.h"
#include "sinks/kubernetes_api.h"

namespace gpud::sinks {

inline constexpr const char* kNodeConditionsSink = "kubernetes-node-conditions";

// Which components a condition covers.
enum class ConditionScope { kGpu, kKernel, kRuntime };

// One condition gpud owns on the Node.
struct ConditionKind {
  const char* type;            // "GpudGPUProblem"
  ConditionScope scope;        //
  const char* problem_reason;  // the reason while True
  const char* ok_reason;       // the reason while False
};

// The conditions gpud keeps: GPUs and the NVIDIA stack, the kernel and host, the container runtime
// and kubelet.
const std::vector<ConditionKind>& condition_kinds();
// The scope of a component; nullopt: no condition covers it (gpud itself, custom plugins).
std::optional<ConditionScope> scope_of(const HealthState& state);

// What a condition should say now.
struct NodeCondition {
  std::string type;
  bool problem = false;  // status "True"
  std::string reason;
  std::string message;
  // What is Unhealthy ("gpu 3 accelerator-nvidia-ecc", "accelerator-nvidia-fabric-manager"): a
  // change here is written at once; a message that only words the same findings differently (a
  // temperature that moved) waits for the resync.
  std::vector<std::string> subjects;
};

// What the sink reads: each GPU's health (the same as /v1/gpus) and every component's latest
// states.
struct NodeHealthInputs {
  std::vector<components::GpuHealth> gpus;
  std::vector<HealthState> states;
};

// The longest condition or event message written (the API server keeps a few KiB; a node with
// every GPU failing would otherwise write them all).
inline constexpr size_t kMaxMessageBytes = 1024;

// The conditions as the findings say now. A condition is a problem when a component it covers is
// Unhealthy; its message then names each Unhealthy GPU (index, bus id, UUID), the component, the
// reason and the suggested action, then each Unhealthy component not about one GPU. A condition
// whose components are all still Initializing (or have no state yet) is left out: not yet known.
// Pure.
std::vector<NodeCondition> judge_conditions(const NodeHealthInputs& in);

// The strategic-merge patch of the Node's status that sets `conditions` (merged by type), each
// with lastHeartbeatTime `now` and lastTransitionTime from `since` (by type; `now` when absent).
nlohmann::json status_patch(const std::vector<NodeCondition>& conditions,
                            const std::map<std::string, std::string>& since, TimePoint now);

// The core/v1 Event that records a condition's transition on the Node.
nlohmann::json transition_event(const std::string& node, const std::string& node_uid,
                                const std::string& event_namespace, const NodeCondition& c,
                                TimePoint now);

struct NodeConditionsOptions {
  std::string node_name;
  std::string event_namespace = "default";               // where the kubelet writes Node events too
  std::chrono::milliseconds poll_interval{5000};         // how often the findings are read
  std::chrono::milliseconds min_write_interval{10'000};  // between two status writes
  std::chrono::milliseconds resync_interval{std::chrono::minutes(10)};  // rewrite unchanged
  std::chrono::milliseconds initial_backoff{1000};
  std::chrono::milliseconds max_backoff{std::chrono::minutes(5)};
  std::chrono::milliseconds log_interval{std::chrono::minutes(1)};  // between two failure lines
  size_t max_pending_events = 64;  // events not yet accepted; the oldest are dropped past this
};

class KubernetesNodeConditions {
 public:
  KubernetesNodeConditions(std::unique_ptr<KubernetesApi> api, NodeConditionsOptions options,
                           std::function<NodeHealthInputs()> read);
  ~KubernetesNodeConditions();
  KubernetesNodeConditions(const KubernetesNodeConditions&) = delete;
  KubernetesNodeConditions& operator=(const KubernetesNodeConditions&) = delete;

  void start();
  // Bounded: interrupts a call in flight.
  void stop();
  // For the gpud component: the last attempt's error, "" while the API server takes the writes.
  components::SinkStatus status() const;

  // One round, as the thread runs it (tests call it directly): read, write what changed, send the
  // waiting events. Returns when the next round is due.
  std::chrono::steady_clock::time_point run_once(std::chrono::steady_clock::time_point now);

 private:
  void loop();
  Result<void> sync_node();
  Result<void> write(const std::vector<NodeCondition>& desired, TimePoint now);
  Result<void> send_events();
  void failed(const Error& e, std::chrono::steady_clock::time_point now);
  void succeeded();

  std::unique_ptr<KubernetesApi> api_;
  const NodeConditionsOptions options_;
  const std::function<NodeHealthInputs()> read_;

  // Only the sink's thread (or a test's run_once) touches these.
  bool synced_ = false;  // the Node was read: its uid and the conditions it already had
  std::string node_uid_;
  std::map<std::string, NodeCondition> written_;  // by type: what the Node holds
  std::map<std::string, std::string> since_;      // by type: lastTransitionTime
  std::optional<std::chrono::steady_clock::time_point> last_write_;
  std::deque<nlohmann::json> pending_events_;
  std::chrono::milliseconds backoff_{0};
  std::chrono::steady_clock::time_point retry_at_{};
  LogRateLimiter failure_log_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::string error_;  // guarded by mu_
  std::thread thread_;
};

}  // namespace gpud::sinks
