// GpuCountsComponent ("accelerator-nvidia-gpu-counts"): the NVML GPU count against --gpu-count. A
// mismatch is Unhealthy; the suggested action follows the reboot history (reboot first, hardware
// inspection once reboots did not help twice).
#pragma once

#include <optional>

#include "components/nvidia/nvidia_component.h"
#include "components/nvidia/verdict.h"
#include "host/host_fs.h"

namespace gpud::components {

inline constexpr const char* kGpuCountMismatchEvent = "gpu-count-mismatch";
inline constexpr std::chrono::hours kGpuCountLookback{72};

struct GpuCountInput {
  size_t nvml_count = 0;
  int expected = 0;                   // --gpu-count; 0: not checked
  size_t sysfs_count = 0;             // NVIDIA display controllers on the PCI bus (information)
  std::vector<TimePoint> reboots;     // "reboot" events of the os component in the lookback
  std::vector<TimePoint> mismatches;  // this component's gpu-count-mismatch events (incl. now)
};

// The rule (pure).
NvidiaVerdict evaluate_gpu_counts(const GpuCountInput& in);

class GpuCountsComponent : public NvidiaComponent {
 public:
  explicit GpuCountsComponent(const ComponentContext& ctx);
  std::string_view name() const override { return "accelerator-nvidia-gpu-counts"; }
  bool can_set_healthy() const override { return true; }

 protected:
  CheckResult evaluate(const nvml::NvmlSnapshot& snapshot) override;
  // A lost GPU is still one NVML enumerates: the count is not its finding.
  bool sees_every_gpu() const override { return true; }

 private:
  host::HostFs fs_;
};

}  // namespace gpud::components
