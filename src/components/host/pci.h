// PciComponent ("pci"): PCIe AER errors from the kernel log (beyond GPUd), and GPUd's ACS check: on
// bare metal, bridges whose ACS Source Validation is on (peer-to-peer traffic forced through the
// root complex) are a Warning event `acs_enabled` at most once a day and a note in the reason.
#pragma once

#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "components/component.h"
#include "components/host/nfs.h"
#include "kmsg/rules.h"

namespace gpud::components {

// PCIe AER corrected, non-fatal and fatal errors in the kernel log.
kmsg::ComponentRules pci_kernel_log_rules();

// Uncorrected fatal AER errors after the newest reboot -> Unhealthy (REBOOT_SYSTEM: the link stays
// down until reset), non-fatal -> Degraded; corrected errors are listed but Healthy.
// `counts` (EventDigest::counts) says how many events each stands for; empty: one each.
KernelLogVerdict evaluate_pci(const std::vector<Event>& events,
                              const std::vector<TimePoint>& reboots,
                              const std::vector<uint64_t>& counts = {});

// How often the bridges' configuration spaces are read again, and how often the event is recorded.
inline constexpr std::chrono::hours kAcsRescanInterval{1};
inline constexpr std::chrono::hours kAcsEventInterval{24};

class PciComponent : public Component {
 public:
  explicit PciComponent(const ComponentContext& ctx) : Component(ctx) {}
  std::string_view name() const override { return "pci"; }
  CheckResult check() override;
  bool can_set_healthy() const override { return true; }

 private:
  // The ACS part of the reason ("" when nothing is enabled or not on bare metal); records the
  // event when none is in the last kAcsEventInterval.
  std::string check_acs(TimePoint now);

  std::mutex acs_mu_;
  std::optional<TimePoint> acs_scanned_;
  std::string virtualization_;
  std::vector<std::string> acs_devices_;
};

}  // namespace gpud::components
