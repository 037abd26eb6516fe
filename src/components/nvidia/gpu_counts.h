// GpuCountsComponent ("accelerator-nvidia-gpu-counts"): the NVML GPU count against --gpu-count, or
// without it against the NVIDIA GPUs on the PCI bus. A mismatch (without --gpu-count: NVML seeing
// fewer) is Unhealthy and names the bus ids NVML does not see; the suggested action follows the
// reboot history (reboot first, hardware inspection once reboots did not help twice).
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
  int expected = 0;  // --gpu-count; 0: the GPUs on the PCI bus (none listed: not checked)
  // NVIDIA GPUs on the PCI bus (vendor 0x10de, class VGA 0x0300 or 3D 0x0302; NVSwitches, class
  // 0x0680, are not GPUs), less those bound to vfio-pci (passed through to a VM, not NVML's).
  size_t sysfs_count = 0;
  std::vector<TimePoint> reboots;     // "reboot" events of the os component in the lookback
  std::vector<TimePoint> mismatches;  // this component's gpu-count-mismatch events (incl. now)
  std::vector<std::string> missing_bus_ids;  // on the PCI bus, not enumerated by NVML
  std::vector<std::string> passthrough;      // bound to vfio-pci, left out of sysfs_count
};

// The count the rule expects: --gpu-count when set, else the PCI bus's (0: not checked).
int expected_gpu_count(const GpuCountInput& in);
// What is wrong with the count ("" when nothing): with --gpu-count any difference, else NVML
// seeing fewer GPUs than the PCI bus shows. Names the bus ids NVML does not see.
std::string gpu_count_mismatch(const GpuCountInput& in);

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
