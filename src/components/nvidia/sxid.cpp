#include "components/nvidia/sxid.h"

#include <fmt/format.h>
#include <re2/re2.h>

#include "catalog/sxid_catalog.h"
#include "components/kernel_log_support.h"
#include "core/log.h"
#include "core/pci_address.h"
#include "kmsg/parser.h"

namespace gpud::components {
namespace {

constexpr std::string_view kSxidErrorsTotal = "accelerator_nvidia_sxid_errors_total";

std::optional<kmsg::Match> match_sxid_line(std::string_view s) {
  // Anchored where the driver begins the message: "nvidia-<switch>: SXid (...)", the switch being
  // "nvswitch<N>" (the nvswitch driver's device name).
  static const RE2 kSxid(
      std::string(kmsg::kMessageStart) +
      R"(nvidia-nvswitch(\d+): SXid \((?:PCI:)?([0-9a-fA-F:.]+)\):\s*(\d+)(?:,\s*(Non-fatal|Fatal))?)");
  const re2::StringPiece in(s.data(), s.size());
  std::string pci, sev;
  int sw = 0, code = 0;
  if (!RE2::PartialMatch(in, kSxid, &sw, &pci, &code, &sev)) return std::nullopt;
  const auto info = catalog::lookup_sxid(code);
  const std::string bdf = normalize_pci_bus_id(pci);
  auto actions = nlohmann::json::array();
  for (auto a : info.repair_actions) actions.push_back(std::string(to_string(a)));
  kmsg::Match m;
  m.name = "error_sxid";
  m.type = info.type;
  m.message = kmsg::sanitize_utf8("SXID " + std::to_string(code) + "(" + info.name +
                                  ") detected on PCI:" + bdf);
  m.extra_info = {{"pci_bus_id", bdf},
                  {"device_id", "PCI:" + bdf},
                  {"sxid", code},
                  {"name", info.name},
                  {"description", info.name},
                  {"category", info.category},
                  {"known", info.known},
                  {"event_type", std::string(to_string(info.type))},
                  {"repair_actions", actions},
                  {"reboot_class", info.reboot_class()},
                  {"log_line", kmsg::log_line_excerpt(s)}};
  if (!sev.empty()) m.extra_info["log_severity"] = sev;
  m.extra_info["nvswitch"] = sw;
  return m;
}

}  // namespace

kmsg::ComponentRules sxid_kernel_log_rules() {
  kmsg::ComponentRules r;
  r.component = std::string(kSxidComponent);
  // The driver prints "<switch>: SXid (PCI:<bdf>): <code>, ..." (nvswitch's SXID print macro); the
  // longer the shortest literal of all rules, the fewer windows the prefilter samples per line.
  r.lines.push_back({{{"SXid (PCI:"}}, match_sxid_line});
  r.describe_metrics = [](MetricRegistry& m) {
    m.describe(kSxidErrorsTotal, "NVIDIA NVSwitch SXid errors recorded, by switch and code",
               MetricKind::kCounter);
  };
  r.count = [](MetricRegistry& metrics, const kmsg::StoredMatch& s) {
    if (!s.match.extra_info.contains("sxid")) return;
    Labels labels{{"uuid", std::string(s.uuid)},
                  {"pci_bus_id", std::string(s.bus_label)},
                  {"sxid", std::to_string(s.match.extra_info.value("sxid", 0))},
                  {"type", std::string(to_string(s.match.type))}};
    // A fault gpud injected (POST /inject-fault) is counted apart: alerts leave it out.
    if (kmsg::marked_injected(s.match.extra_info)) labels["injected"] = "true";
    metrics.add(kSxidComponent, kSxidErrorsTotal, 1, labels);
  };
  return r;
}

SxidComponent::SxidComponent(const ComponentContext& ctx) : Component(ctx) {}

bool SxidComponent::supported() const {
  return nvidia_kernel_log_supported(ctx(), kSxidComponent, has_events_);
}

CheckResult SxidComponent::check() {
  const TimePoint now = Clock::now();
  const TimePoint since = lookback_start(ctx(), config().sxid_lookback, now);
  return error_component_check(ctx(), kSxidComponent, "SXIDComponent", since, now,
                               [&](const auto& events, const auto& reboots) {
                                 return evaluate_sxid(events, reboots, config().sxid_thresholds);
                               });
}

}  // namespace gpud::components
