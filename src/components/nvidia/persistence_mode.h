// accelerator-nvidia-persistence-mode: every GPU that supports persistence mode must have it on
// (GPUd: Unhealthy otherwise), checked every 30 s.
#pragma once

#include <set>
#include <string>

#include "components/nvidia/nvidia_component.h"

namespace gpud::components {

inline constexpr std::string_view kPersistenceModeName = "accelerator-nvidia-persistence-mode";

struct PersistenceModeVerdict {
  CheckResult result;
  std::vector<const nvml::GpuSnapshot*> disabled;  // GPUs supporting PM with it off
};

// The rule: PM supported but disabled on any GPU ⇒ Unhealthy; not supported ⇒ not applicable.
PersistenceModeVerdict evaluate_persistence_mode(const nvml::NvmlSnapshot& snapshot);

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
