// Per-GPU health: for each GPU, the worst health any component gives it, with the findings that
// made it, so that an operator or a device plugin can isolate one GPU instead of draining the node.
// It is read from the components' latest states, never from NVML: their typed findings (a GPU by
// index, UUID or bus id; every GPU for a fault of NVML itself), what kept a component from checking
// the GPU (findings blocked by another component), and each GPU's row of the components' data.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/health.h"
#include "core/metrics.h"
#include "nvml/device.h"

namespace gpud::components {

// The per-GPU metric, one-hot over the health values like gpud_component_health.
inline constexpr const char* kGpuHealthMetric = "accelerator_nvidia_gpu_health";
// Why a GPU is not Healthy: one series (value 1) per cause of each GPU, labelled with the GPU, the
// component, the cause's health, its suggested action ("" when none) and its reason (cut at
// kGpuHealthCauseReasonBytes), and injected="true" for a drill; none for a Healthy GPU. What a
// per-GPU alert says.
inline constexpr const char* kGpuHealthCauseMetric = "accelerator_nvidia_gpu_health_cause";
inline constexpr size_t kGpuHealthCauseReasonBytes = 200;

struct GpuHealthCause {
  std::string component;
  Health health = Health::kHealthy;
  std::string reason;
  // The finding's own suggested action, else the component state's first; none when neither has
  // one.
  std::optional<RepairAction> action;
  bool injected = false;  // the finding stands on faults gpud injected (a drill)
};

// A component that did not check the GPU, and why: the fault another component owns.
struct GpuBlocked {
  std::string component;
  std::string reason;  // "GPU 3 (0000:5d:00.0) lost", "all GPUs: NVML is not answering: …"
  std::string owner;   // the component that owns the fault ("accelerator-nvidia-info")
};

struct GpuHealth {
  unsigned int index = 0;
  std::string uuid;
  std::string pci_bus_id;
  Health health = Health::kHealthy;
  std::vector<GpuHealthCause> causes;  // worst first
  std::vector<GpuBlocked> blocked_by;
  // Each component's row for the GPU (its data's "gpus" entry, without the identity keys), by
  // component name: the values the verdicts judged.
  nlohmann::json values = nlohmann::json::object();
};

// Whether gpu_health fills GpuHealth::values: the API's /v1/gpus shows them; the metrics (every
// scrape) and the node conditions read only the health and its causes.
enum class GpuValues { kWith, kWithout };

// The GPUs of `identity` (the last good snapshot: index, uuid, bus id) judged over `states` (every
// component's latest states). Pure.
std::vector<GpuHealth> gpu_health(const nvml::NvmlSnapshot& identity,
                                  const std::vector<const HealthState*>& states,
                                  GpuValues values = GpuValues::kWith);
std::vector<GpuHealth> gpu_health(const nvml::NvmlSnapshot& identity,
                                  const std::vector<HealthState>& states,
                                  GpuValues values = GpuValues::kWith);

// [{"index", "uuid", "pci_bus_id", "health", "reasons": [{"component", "health", "reason",
// "suggested_action"?}], "blocked_by": [{"component", "reason", "owner"}], "values": {<component>:
// {...}}}]
nlohmann::json to_json(const std::vector<GpuHealth>& gpus);

// Replaces the kGpuHealthMetric series with one per GPU and health value (1 for its health, 0 for
// the others), and the kGpuHealthCauseMetric series with one per cause; none when `gpus` is empty.
void publish_gpu_health(MetricRegistry& metrics, const std::vector<GpuHealth>& gpus);

}  // namespace gpud::components
