// PeermemComponent ("accelerator-nvidia-peermem"): whether ib_core uses the nvidia_peermem module
// (GPUDirect RDMA) from /proc/modules, and peermem's kernel-log events.
#pragma once

#include <atomic>
#include <vector>

#include "components/kernel_log_support.h"
#include "host/modules.h"

namespace gpud::components {

// "ERROR detected invalid context" of nvidia-peermem in the kernel log.
kmsg::ComponentRules peermem_kernel_log_rules();

struct PeermemStatus {
  bool peermem_loaded = false;        // nvidia_peermem is in /proc/modules
  bool ib_core_uses_peermem = false;  // ib_core's use count is not 0 and it lists nvidia_peermem
};
PeermemStatus peermem_status(const std::vector<host::LoadedModule>& modules);

// Healthy either way (as GPUd: "ibcore successfully loaded peermem module" / "ibcore is not using
// peermem module"), except Degraded when InfiniBand ports are expected
// (--infiniband-expected-port-states) and present (`infiniband_ports` > 0) but ib_core does not use
// peermem: GPU memory then cannot go to the network directly. An unreadable /proc/modules is
// Degraded with the error (the component takes a missing one for a kernel without modules).
CheckResult evaluate_peermem(const Result<std::vector<host::LoadedModule>>& modules,
                             bool ports_expected, int infiniband_ports, TimePoint now);

class PeermemComponent : public Component {
 public:
  explicit PeermemComponent(const ComponentContext& ctx);
  std::string_view name() const override { return "accelerator-nvidia-peermem"; }
  std::vector<std::string> tags() const override {
    return {"accelerator", "gpu", "nvidia", "accelerator-nvidia-peermem"};
  }
  bool supported() const override;
  CheckResult check() override;
  bool can_set_healthy() const override { return true; }

 private:
  host::HostFs fs_;
  mutable std::atomic<bool> has_events_{false};
};

}  // namespace gpud::components
