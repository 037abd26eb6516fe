// accelerator-nvidia-pcie: PCIe link generation and width against the maximum, and replay counter
// growth against DCGM's per-lane replay budget.
#pragma once

#include <map>
#include <string>

#include "components/nvidia/nvidia_component.h"
#include "components/nvidia/verdict.h"

namespace gpud::components {

inline constexpr std::string_view kPcieName = "accelerator-nvidia-pcie";

// DCGM's expected replays for `elapsed` at a 1e-12 BER per lane: ceil(rate[gen] * lanes * minutes)
// with rate per minute per lane Gen1 0.15, Gen2 0.30, Gen3 0.48, Gen4 0.96, Gen5 1.92, Gen6+ 3.84.
uint64_t pcie_replay_budget(uint32_t gen, uint32_t lanes, std::chrono::seconds elapsed);

// The previous check's replay counter of one GPU.
struct PcieReplaySample {
  uint32_t counter = 0;
  TimePoint time{};
};

// The rule: current width below max ⇒ Degraded; current generation below max while the GPU is busy
// (utilisation > 0; idle GPUs lower the link speed to save power) ⇒ Degraded; replay counter growth
// since `previous` (keyed by uuid) above the budget ⇒ Degraded. NOT_SUPPORTED ⇒ not applicable.
NvidiaVerdict evaluate_pcie(const nvml::NvmlSnapshot& snapshot,
                            const std::map<std::string, PcieReplaySample>& previous);

class PcieComponent : public NvidiaComponent {
 public:
  explicit PcieComponent(const ComponentContext& ctx);
  std::string_view name() const override { return kPcieName; }

 protected:
  CheckResult evaluate(const nvml::NvmlSnapshot& snapshot) override;

 private:
  std::map<std::string, PcieReplaySample> previous_;
};

}  // namespace gpud::components
