#include "components/host/pci.h"

#include <fmt/format.h>
#include <re2/re2.h>

#include <algorithm>

#include "components/kernel_log_support.h"
#include "core/pci_address.h"
#include "host/pci.h"

namespace gpud::components {

KernelLogVerdict evaluate_pci(const std::vector<Event>& events,
                              const std::vector<TimePoint>& reboots,
                              const std::vector<uint64_t>& counts) {
  TimePoint last_reboot{};
  for (TimePoint r : reboots) last_reboot = std::max(last_reboot, r);
  uint64_t fatal = 0, nonfatal = 0, corrected = 0, link_resets = 0, failed_recoveries = 0;
  const Event* worst = nullptr;
  const Event* latest_failed_recovery = nullptr;
  for (size_t i = 0; i < events.size(); ++i) {
    const Event& e = events[i];
    const uint64_t n = counts.empty() ? 1 : counts[i];
    if (e.name == "pcie_aer_corrected") {
      corrected += n;
      continue;
    }
    if (e.name == "pcie_link_reset") {
      link_resets += n;
      continue;
    }
    if (e.time <= last_reboot) continue;
    if (e.name == "pcie_aer_recovery_failed") {
      failed_recoveries += n;
      if (latest_failed_recovery == nullptr || e.time > latest_failed_recovery->time)
        latest_failed_recovery = &e;
      continue;
    }
    if (e.name == "pcie_aer_uncorrected_fatal") {
      fatal += n;
      if (worst == nullptr || worst->name != e.name || e.time > worst->time) worst = &e;
    } else if (e.name == "pcie_aer_uncorrected_nonfatal") {
      nonfatal += n;
      if (worst == nullptr || (worst->name == e.name && e.time > worst->time)) worst = &e;
    }
  }
  KernelLogVerdict v;
  if (failed_recoveries > 0) {
    v.health = Health::kUnhealthy;
    v.reason = fmt::format("{} failed PCIe error recoveries, latest: {}", failed_recoveries,
                           latest_failed_recovery->message);
    if (fatal > 0)
      v.reason +=
          fmt::format("; {} uncorrected fatal PCIe AER errors, latest: {}", fatal, worst->message);
    v.actions = SuggestedActions{
        "a failed PCIe error recovery leaves the devices below the port unusable until the "
        "system reboots",
        {RepairAction::kRebootSystem}};
  } else if (fatal > 0) {
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
  if (link_resets > 0) {
    if (v.reason.empty()) v.reason = "ok";
    v.reason += fmt::format("; {} PCIe link resets by error recovery", link_resets);
  }
  return v;
}

CheckResult PciComponent::check() {
  const TimePoint now = Clock::now();
  const TimePoint since = lookback_start(ctx(), std::chrono::seconds(0), now);
  // Grouped on the name and split at reboots: memory bounded by the kinds of error.
  auto h = kernel_log_digest(ctx(), name(), since, {}, 1);
  KernelLogVerdict v = h ? evaluate_pci(h->digest.events, h->reboots, h->digest.counts)
                         : unreadable_history(h.error());
  if (std::string acs = check_acs(now); !acs.empty())
    v.reason = (v.reason.empty() ? "ok" : v.reason) + "; " + acs;
  return single_state(name(), v.health, v.reason, v.actions, nullptr, now);
}

std::string PciComponent::check_acs(TimePoint now) {
  std::lock_guard lock(acs_mu_);
  if (!acs_scanned_ || now - *acs_scanned_ >= kAcsRescanInterval || now < *acs_scanned_) {
    acs_scanned_ = now;
    host::HostFs fs(config().host_root);
    virtualization_ = host::virtualization(fs);
    // In a VM the bridges are the hypervisor's, and ACS there is what passthrough needs.
    acs_devices_ = virtualization_ == "none"
                       ? host::scan_acs_source_validation(fs).source_validation
                       : std::vector<std::string>{};
  }
  if (acs_devices_.empty()) return "";
  std::string list;
  for (const auto& d : acs_devices_) list += (list.empty() ? "" : ", ") + d;
  if (ctx().events != nullptr && !ctx().scan_mode) {
    auto recent =
        ctx().events->query(name(), now - kAcsEventInterval, now + std::chrono::minutes(1));
    bool seen = recent && std::any_of(recent->begin(), recent->end(),
                                      [](const Event& e) { return e.name == "acs_enabled"; });
    if (recent && !seen) {
      Event e;
      e.component = std::string(name());
      e.time = now;
      e.name = "acs_enabled";
      e.type = EventType::kWarning;
      e.message = "host virt env is \"" + virtualization_ +
                  "\", ACS is enabled on the following PCI devices: " + list +
                  " (needs to be disabled)";
      e.extra_info["devices"] = acs_devices_;
      record(std::move(e));
    }
  }
  return "ACS Source Validation enabled on " + list +
         " (peer-to-peer traffic goes through the root complex)";
}

namespace {

// The severities the kernel prints: "Uncorrected"/"Corrected" until 6.x, "Uncorrectable"/
// "Correctable" since.
const std::string kSeverity =
    R"((Corrected|Correctable|Uncorrected \(Non-Fatal\)|Uncorrectable \(Non-Fatal\)|)"
    R"(Uncorrected \(Fatal\)|Uncorrectable \(Fatal\)))";
const std::string kBdf = R"([0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])";

// An AER event of severity `sev` on `dev` (a bus id, or the 4-hex-digit requester id that kernels
// before 4.x print): both lines of one error name the same device and so make the same message,
// which the event pipeline's deduper keeps once.
kmsg::Match aer_match(const std::string& sev, std::string dev, std::string_view s) {
  kmsg::Match m;
  m.type = EventType::kWarning;
  m.name = "pcie_aer_corrected";
  std::string what = "corrected";
  if (kmsg::contains(sev, "Fatal)") && !kmsg::contains(sev, "Non-Fatal")) {
    m.type = EventType::kFatal, m.name = "pcie_aer_uncorrected_fatal", what = "uncorrected fatal";
  } else if (kmsg::contains(sev, "Non-Fatal")) {
    m.type = EventType::kCritical, m.name = "pcie_aer_uncorrected_nonfatal";
    what = "uncorrected non-fatal";
  }
  m.extra_info = {{"severity", sev}, {"log_line", kmsg::log_line_excerpt(s)}};
  if (dev.find(':') != std::string::npos) {
    dev = normalize_pci_bus_id(dev);
    m.extra_info["pci_bus_id"] = dev;
  } else {
    m.extra_info["requester_id"] = dev;
  }
  m.message = "PCIe AER " + what + " error on " + dev;
  return m;
}

// "pcieport 0000:80:01.1: AER: Uncorrected (Fatal) error received: 0000:86:00.0"
std::optional<kmsg::Match> match_aer(std::string_view s) {
  static const RE2 kRe("AER: (?:Multiple )?" + kSeverity +
                       " error (?:message )?received(?: from)?:? (?:id=)?(" + kBdf +
                       "|[0-9a-fA-F]{4})");
  const re2::StringPiece in(s.data(), s.size());
  std::string sev, dev;
  if (!RE2::PartialMatch(in, kRe, &sev, &dev)) return std::nullopt;
  kmsg::Match m = aer_match(sev, dev, s);
  static const RE2 kPort("(" + kBdf + "): AER:");
  std::string port;
  if (RE2::PartialMatch(in, kPort, &port))
    m.extra_info["reporting_port"] = normalize_pci_bus_id(port);
  return m;
}

// The detail line, alone in some logs: "pcieport 0000:40:01.1: PCIe Bus Error:
// severity=Uncorrected (Fatal), type=Transaction Layer, (Requester ID)" (5.x+: "AER: " before
// "PCIe", the device that logged it first; before 4.x ", id=0018(Receiver ID)").
std::optional<kmsg::Match> match_bus_error(std::string_view s) {
  static const RE2 kRe("(" + kBdf + "): (?:AER: )?PCIe Bus Error: severity=" + kSeverity +
                       ", type=([^,]+)(?:, id=([0-9a-fA-F]{4}))?");
  const re2::StringPiece in(s.data(), s.size());
  std::string dev, sev, type, id;
  if (!RE2::PartialMatch(in, kRe, &dev, &sev, &type, &id)) return std::nullopt;
  kmsg::Match m = aer_match(sev, id.empty() ? dev : id, s);
  m.extra_info["error_type"] = type;
  if (!id.empty()) m.extra_info["pci_bus_id"] = normalize_pci_bus_id(dev);
  return m;
}

// A line in which the PCIe port `pattern`'s group 1 names reports on its error recovery: an event
// `name` of `type`, "<what> <port>".
std::optional<kmsg::Match> port_event(std::string_view s, const RE2& pattern, EventType type,
                                      const char* name, const char* what) {
  std::string dev;
  if (!RE2::PartialMatch(re2::StringPiece(s.data(), s.size()), pattern, &dev)) return std::nullopt;
  kmsg::Match m;
  m.type = type;
  m.name = name;
  dev = normalize_pci_bus_id(dev);
  m.message = std::string(what) + " " + dev;
  m.extra_info = {{"pci_bus_id", dev}, {"log_line", kmsg::log_line_excerpt(s)}};
  return m;
}

// drivers/pci/pcie: 4.x aer/aerdrv_core.c and 4.19 err.c "AER: Device recovery failed", 5.x-6.x
// err.c (dev_fmt "AER: ") "device recovery failed"; the port that ran the recovery names itself.
std::optional<kmsg::Match> match_recovery_failed(std::string_view s) {
  static const RE2 kRe(std::string(kmsg::kMessageStart) + R"(\S+ ()" + kBdf +
                       R"(): (?:AER: )?[Dd]evice recovery failed)");
  return port_event(s, kRe, EventType::kFatal, "pcie_aer_recovery_failed",
                    "PCIe error recovery failed below");
}

// aer_root_reset: 4.x "Root Port link has been reset", 5.x with "AER: ", 6.x "%s Port link has
// been reset (%d)" (Root or Downstream).
std::optional<kmsg::Match> match_link_reset(std::string_view s) {
  static const RE2 kRe(std::string(kmsg::kMessageStart) + R"(\S+ ()" + kBdf +
                       R"(): (?:AER: )?(?:Root|Downstream) Port link has been reset)");
  return port_event(s, kRe, EventType::kWarning, "pcie_link_reset",
                    "PCIe link reset by error recovery at");
}

}  // namespace

kmsg::ComponentRules pci_kernel_log_rules() {
  kmsg::ComponentRules r;
  r.component = "pci";
  r.lines.push_back({{{"AER: Corr"}, {"AER: Unco"}, {"AER: Mult"}}, match_aer});
  r.lines.push_back({{{"PCIe Bus Error"}}, match_bus_error});
  r.lines.push_back({{{"evice recovery failed", "very failed"}}, match_recovery_failed});
  r.lines.push_back({{{"Port link has been reset", "s been reset"}}, match_link_reset});
  return r;
}

}  // namespace gpud::components
