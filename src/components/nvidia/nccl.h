// NcclComponent ("accelerator-nvidia-nccl"): lists its kernel-log events; Healthy (as GPUd).
#pragma once

#include "components/kernel_log_support.h"

namespace gpud::components {

// Segfaults in libnccl.so in the kernel log.
kmsg::ComponentRules nccl_kernel_log_rules();

class NcclComponent : public KernelLogEventsComponent {
 public:
  explicit NcclComponent(const ComponentContext& ctx)
      : KernelLogEventsComponent(ctx, "accelerator-nvidia-nccl",
                                 {"accelerator", "gpu", "nvidia", "accelerator-nvidia-nccl"}) {}
};

}  // namespace gpud::components
