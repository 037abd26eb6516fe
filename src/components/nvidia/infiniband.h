// InfinibandComponent ("accelerator-nvidia-infiniband"): lists its kernel-log events; Healthy (as
// GPUd).
#pragma once

#include "components/kernel_log_support.h"

namespace gpud::components {

// MLX5 adapters in the kernel log: insufficient PCIe slot power, an overheated port module, a
// failed ACCESS_REG command.
kmsg::ComponentRules infiniband_kernel_log_rules();

class InfinibandComponent : public KernelLogEventsComponent {
 public:
  explicit InfinibandComponent(const ComponentContext& ctx)
      : KernelLogEventsComponent(
            ctx, "accelerator-nvidia-infiniband",
            {"accelerator", "gpu", "nvidia", "accelerator-nvidia-infiniband"}) {}
};

}  // namespace gpud::components
