#include "components/nvidia/nccl.h"

namespace gpud::components {

kmsg::ComponentRules nccl_kernel_log_rules() {
  kmsg::ComponentRules r;
  r.component = "accelerator-nvidia-nccl";
  r.lines = {kmsg::pattern_rule({{"in libnccl", "libncc"}}, "nvidia_nccl_segfault_in_libnccl",
                                R"(segfault at.*in (libnccl\.so\S*))",
                                "NCCL communication error (segfault in libnccl.so)", "library")};
  return r;
}

}  // namespace gpud::components
