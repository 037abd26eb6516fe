#include "components/nvidia/peermem.h"

namespace gpud::components {

kmsg::ComponentRules peermem_kernel_log_rules() {
  kmsg::ComponentRules r;
  r.component = "accelerator-nvidia-peermem";
  r.lines = {kmsg::pattern_rule({{"invalid context", "contex"}}, "nvidia_peermem_invalid_context",
                                R"(ERROR detected invalid context, skipping further processing)",
                                "peermem error detected (possible GPU communication issue)")};
  return r;
}

}  // namespace gpud::components
