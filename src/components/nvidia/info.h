// InfoComponent ("accelerator-nvidia-info"): product, brand, architecture, driver and CUDA versions
// and the identity of every GPU. It owns NVML's faults (kNvmlFaultOwner): NVML missing while NVIDIA
// GPUs are expected, failing to initialise or not answering, and each GPU that is lost or needs a
// reset, named with its index, bus id, UUID, serial and the call that said so.
#pragma once

#include <map>
#include <mutex>
#include <optional>
#include <string>

#include "components/nvidia/nvidia_component.h"
#include "components/nvidia/verdict.h"

namespace gpud::components {

// The rule over one snapshot (pure; unit tests call it): Healthy, but Unhealthy + REBOOT_SYSTEM
// for each GPU that is lost or requires a reset.
NvidiaVerdict evaluate_info(const nvml::NvmlSnapshot& snapshot);

// The owner's events, one per change (issue #31: every health change an event): a GPU lost, one
// that requires a reset, and its return; NVML unusable (missing while GPUs are expected, failing to
// initialise), NVML not answering (a hung call), and its return. Each GPU event carries the GPU's
// index, bus id and UUID (gpu_index, device_bus_id, device_uuid).
inline constexpr const char* kGpuLostEvent = "gpu_lost";
inline constexpr const char* kGpuRequiresResetEvent = "gpu_requires_reset";
inline constexpr const char* kGpuRecoveredEvent = "gpu_recovered";
inline constexpr const char* kNvmlNotAnsweringEvent = "nvml_not_answering";
inline constexpr const char* kNvmlUnusableEvent = "nvml_unusable";
inline constexpr const char* kNvmlRecoveredEvent = "nvml_recovered";
// The labels of a GPU's accelerator_nvidia_gpu_info series: uuid, gpu and pci_bus_id as on every
// per-GPU series, NVML's product name, the driver version and the bus id in NVML's (and DCGM's)
// form ("00000000:5D:00.0").
Labels gpu_info_labels(const nvml::GpuSnapshot& gpu, const nvml::DriverInfo& driver);

class InfoComponent : public NvidiaComponent {
 public:
  explicit InfoComponent(const ComponentContext& ctx);
  std::string_view name() const override { return kNvmlFaultOwner; }

 protected:
  CheckResult evaluate(const nvml::NvmlSnapshot& snapshot) override;
  bool owns_nvml_faults() const override { return true; }
  void judge_without_snapshot(CheckResult& r) override;

 private:
  // Reads back the newest of its events (once), so that a restart does not record again what is
  // already recorded.
  void seed_locked();
  void record_gpu_changes(const nvml::NvmlSnapshot& snapshot);

  std::mutex changes_mu_;
  bool seeded_ = false;
  std::optional<std::string> nvml_fault_;             // the NVML fault event last recorded
  std::map<std::string, std::string> gpu_condition_;  // bus id -> lost / requires-reset event
};

}  // namespace gpud::components
