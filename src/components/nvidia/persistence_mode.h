// accelerator-nvidia-persistence-mode: every GPU that supports persistence mode must have it on
// (GPUd: Unhealthy otherwise), checked every 30 s.
#pragma once

#include <set>
#include <string>

#include "components/nvidia/nvidia_component.h"
#include "components/nvidia/verdict.h"

namespace gpud::components {

inline constexpr std::string_view kPersistenceModeName = "accelerator-nvidia-persistence-mode";

// The GPUs that support persistence mode and have it off.
std::vector<const nvml::GpuSnapshot*> persistence_mode_disabled(const nvml::NvmlSnapshot& snapshot);

// The rule: PM supported but disabled on any GPU ⇒ Unhealthy; not supported ⇒ not applicable.
NvidiaVerdict evaluate_persistence_mode(const nvml::NvmlSnapshot& snapshot);

class PersistenceModeComponent : public NvidiaComponent {
 public:
  explicit PersistenceModeComponent(const ComponentContext& ctx) : NvidiaComponent(ctx) {}
  std::string_view name() const override { return kPersistenceModeName; }
  std::chrono::seconds interval() const override;

 protected:
  CheckResult evaluate(const nvml::NvmlSnapshot& snapshot) override;

 private:
  std::set<std::string> reported_;  // uuids with a persistence_mode_disabled event this episode
};

}  // namespace gpud::components
