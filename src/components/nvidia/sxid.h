// SxidComponent ("accelerator-nvidia-error-sxid"): NVSwitch SXid errors from the kernel log, judged
// by the same reboot-aware state machine as Xid (evaluate_sxid in xid.h).
#pragma once

#include <atomic>

#include "components/nvidia/xid.h"

namespace gpud::components {

// The SXid rule of the kernel log ("nvidia-nvswitchN: SXid (PCI:...): code, ..."); stored SXids
// are counted per switch, code and type (accelerator_nvidia_sxid_errors_total).
kmsg::ComponentRules sxid_kernel_log_rules();

class SxidComponent : public Component {
 public:
  explicit SxidComponent(const ComponentContext& ctx);
  std::string_view name() const override { return kSxidComponent; }
  std::vector<std::string> tags() const override {
    return {"accelerator", "gpu", "nvidia", "nvswitch", std::string(kSxidComponent)};
  }
  bool supported() const override;
  std::chrono::seconds interval() const override { return std::chrono::seconds(30); }
  CheckResult check() override;
  bool can_set_healthy() const override { return true; }

 private:
  mutable std::atomic<bool> has_events_{false};
};

}  // namespace gpud::components
