#include "components/host/pci.h"

#include <fmt/format.h>

#include <algorithm>

#include "components/kernel_log_support.h"

namespace gpud::components {

KernelLogVerdict evaluate_pci(const std::vector<Event>& events,
                              const std::vector<TimePoint>& reboots) {
  TimePoint last_reboot{};
  for (TimePoint r : reboots) last_reboot = std::max(last_reboot, r);
  int fatal = 0, nonfatal = 0, corrected = 0;
  const Event* worst = nullptr;
  for (const Event& e : events) {
    if (e.name == "pcie_aer_corrected") {
      ++corrected;
      continue;
    }
    if (e.time <= last_reboot) continue;
    if (e.name == "pcie_aer_uncorrected_fatal") {
      ++fatal;
      if (worst == nullptr || worst->name != e.name || e.time > worst->time) worst = &e;
    } else if (e.name == "pcie_aer_uncorrected_nonfatal") {
      ++nonfatal;
      if (worst == nullptr || (worst->name == e.name && e.time > worst->time)) worst = &e;
    }
  }
  KernelLogVerdict v;
  if (fatal > 0) {
    v.health = Health::kUnhealthy;
    v.reason =
        fmt::format("{} uncorrected fatal PCIe AER errors, latest: {}", fatal, worst->message);
    v.actions = SuggestedActions{"a fatal PCIe error leaves the link down until the system reboots",
                                 {RepairAction::kRebootSystem}};
  } else if (nonfatal > 0) {
    v.health = Health::kDegraded;
    v.reason = fmt::format("{} uncorrected non-fatal PCIe AER errors, latest: {}", nonfatal,
                           worst->message);
  } else if (corrected > 0) {
    v.reason = fmt::format("ok; {} corrected PCIe AER errors", corrected);
  }
  return v;
}

CheckResult PciComponent::check() {
  const TimePoint now = Clock::now();
  const TimePoint since = lookback_start(ctx(), std::chrono::seconds(0), now);
  std::vector<Event> events;
  if (auto ev = this->events(since, TimePoint::max()); ev) events = std::move(*ev);
  auto reboots = ctx().scan_mode ? std::vector<TimePoint>{} : reboot_times(ctx().events, since);
  KernelLogVerdict v = evaluate_pci(events, reboots);
  return single_state(name(), v.health, v.reason, v.actions, {}, now);
}

}  // namespace gpud::components
