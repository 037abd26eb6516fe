// PciComponent ("pci"): PCIe AER errors from the kernel log. Beyond GPUd, whose pci component
// only reports ACS settings.
#pragma once

#include <vector>

#include "components/component.h"
#include "components/host/nfs.h"
#include "kmsg/rules.h"

namespace gpud::components {

// PCIe AER corrected, non-fatal and fatal errors in the kernel log.
kmsg::ComponentRules pci_kernel_log_rules();

// Uncorrected fatal AER errors after the newest reboot -> Unhealthy (REBOOT_SYSTEM: the link stays
// down until reset), non-fatal -> Degraded; corrected errors are listed but Healthy.
KernelLogVerdict evaluate_pci(const std::vector<Event>& events,
                              const std::vector<TimePoint>& reboots);

class PciComponent : public Component {
 public:
  explicit PciComponent(const ComponentContext& ctx) : Component(ctx) {}
  std::string_view name() const override { return "pci"; }
  CheckResult check() override;
  bool can_set_healthy() const override { return true; }
};

}  // namespace gpud::components
