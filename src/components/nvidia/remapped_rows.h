// RemappedRowsComponent ("accelerator-nvidia-remapped-rows"): HBM row remapping on the products
// that have it (A100, A10, H100, H200, B100, B200, GB200): a pending remap needs a GPU reset
// (reboot), a failed remap is an RMA case.
#pragma once

#include "components/nvidia/nvidia_component.h"
#include "components/nvidia/verdict.h"

namespace gpud::components {

// The rule over one snapshot (pure; unit tests call it).
NvidiaVerdict evaluate_remapped_rows(const nvml::NvmlSnapshot& snapshot);

class RemappedRowsComponent : public NvidiaComponent {
 public:
  explicit RemappedRowsComponent(const ComponentContext& ctx);
  std::string_view name() const override { return "accelerator-nvidia-remapped-rows"; }
  // False once a check (or, in scan, a probe) saw a product without row remapping.
  bool supported() const override;
  bool can_set_healthy() const override { return true; }

 protected:
  bool publishes_metrics(const nvml::NvmlSnapshot& snapshot) const override;
  CheckResult evaluate(const nvml::NvmlSnapshot& snapshot) override;
};

}  // namespace gpud::components
