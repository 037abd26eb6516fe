// PeermemComponent ("accelerator-nvidia-peermem"): lists its kernel-log events; Healthy (as GPUd).
#pragma once

#include "components/kernel_log_support.h"

namespace gpud::components {

// "ERROR detected invalid context" of nvidia-peermem in the kernel log.
kmsg::ComponentRules peermem_kernel_log_rules();

class PeermemComponent : public KernelLogEventsComponent {
 public:
  explicit PeermemComponent(const ComponentContext& ctx)
      : KernelLogEventsComponent(ctx, "accelerator-nvidia-peermem",
                                 {"accelerator", "gpu", "nvidia", "accelerator-nvidia-peermem"}) {}
};

}  // namespace gpud::components
