// Per-GPU health: for each GPU, the worst health any component gives it, with the findings that
// made it, so that an operator or a device plugin can isolate one GPU instead of draining the node.
// It is read from the components' latest states, never from NVML: a component's NVIDIA verdict
// lists its per-GPU findings in extra_info "gpu_findings" (render_verdict), the Xid / SXid
// components their devices in extra_info "devices" (by bus id), and a fault of NVML itself (a
// finding of accelerator-nvidia-info about no single GPU) is a cause of every GPU.
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

struct GpuHealth {
  unsigned int index = 0;
  std::string uuid;
  std::string pci_bus_id;
  Health health = Health::kHealthy;
  std::vector<GpuHealthCause> causes;  // worst first
};

// The GPUs of `identity` (the last good snapshot: index, uuid, bus id) judged over `states` (every
// component's latest states). Pure.
std::vector<GpuHealth> gpu_health(const nvml::NvmlSnapshot& identity,
                                  const std::vector<HealthState>& states);

// [{"index", "uuid", "pci_bus_id", "health", "reasons": [{"component", "health", "reason"}]}]
nlohmann::json to_json(const std::vector<GpuHealth>& gpus);

// Replaces the kGpuHealthMetric series with one per GPU and health value (1 for its health, 0 for
// the others), and the kGpuHealthCauseMetric series with one per cause; none when `gpus` is empty.
void publish_gpu_health(MetricRegistry& metrics, const std::vector<GpuHealth>& gpus);

}  // namespace gpud::components
