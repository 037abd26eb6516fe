#include "components/nvidia/xid.h"

#include <fmt/format.h>
#include <re2/re2.h>

#include <algorithm>
#include <cctype>
#include <limits>

#include "catalog/xid_catalog.h"
#include "components/kernel_log_support.h"
#include "components/nvidia/nvidia_component.h"
#include "core/log.h"
#include "core/parse_number.h"
#include "core/pci_address.h"
#include "kmsg/parser.h"
#include "nvml/source.h"
#include "runtimes/attribution.h"

namespace gpud::components {

ErrorRecord to_error_record(const Event& e, std::string_view code_key) {
  ErrorRecord r;
  r.time = e.time;
  r.type = e.type;
  const auto& x = e.extra_info;
  r.code = x.contains(code_key) && x[code_key].is_number_integer() ? x[code_key].get<int>() : 0;
  if (x.contains("repair_actions") && x["repair_actions"].is_array() &&
      !x["repair_actions"].empty() && x["repair_actions"][0].is_string())
    r.action = parse_repair_action(x["repair_actions"][0].get<std::string>());
  else if (code_key == "xid" && r.code > 0) {
    auto info = catalog::lookup_xid(r.code);
    if (!info.repair_actions.empty()) r.action = info.repair_actions.front();
  }
  r.reason = e.message;
  const std::string bus = x.value("pci_bus_id", std::string());
  if (!bus.empty() && r.reason.find(bus) == std::string::npos) r.reason += " (" + bus + ")";
  const std::string uuid = x.value("gpu_uuid", std::string());
  if (!uuid.empty()) r.reason += " UUID:" + uuid;
  r.device = !bus.empty() ? bus : uuid;
  r.injected = kmsg::marked_injected(x);
  return r;
}

std::vector<std::string> error_record_key_paths(std::string_view code_key) {
  return {"/" + std::string(code_key), "/repair_actions/0", "/pci_bus_id", "/gpu_uuid"};
}

namespace {

ErrorVerdict evaluate(const std::vector<Event>& events, const std::vector<TimePoint>& reboots,
                      const RebootThresholds& t, std::string_view key, bool skip_remap_codes) {
  std::vector<ErrorRecord> records;
  // The store answers newest first; replaying oldest first keeps the log's order among events of
  // the same second (a saved log scanned at once).
  for (auto it = events.rbegin(); it != events.rend(); ++it) {
    const Event& e = *it;
    ErrorRecord r = to_error_record(e, key);
    if (skip_remap_codes && (r.code == 63 || r.code == 64)) continue;
    records.push_back(std::move(r));
  }
  for (TimePoint b : reboots) records.push_back({b, true, 0, EventType::kWarning, {}, "", ""});
  return replay_errors_per_device(std::move(records), t);
}

}  // namespace

CheckResult error_check_result(std::string_view component, const ErrorVerdict& v,
                               std::string_view what, uint64_t total,
                               const std::vector<Event>& newest, TimePoint now) {
  std::string reason = v.reason.empty() ? fmt::format("{} is healthy", what) : v.reason;
  CheckResult r = single_state(component, v.health, reason, v.actions, nullptr, now);
  r.states.front().name = std::string(component == kXidComponent ? "error_xid" : "error_sxid");
  // Each device with a current error, worst first: what an operator isolates or inspects. A
  // kernel-log line names its device by bus id alone: a GPU for an Xid, an NVSwitch for an SXid.
  for (const DeviceError& d : v.devices) {
    Finding f = Finding::about(
        component == kXidComponent ? Subject::gpu_at(d.device) : Subject::nvswitch_at(d.device),
        d.health, d.reason, d.action);
    f.code = d.code;
    f.injected = d.injected;
    r.states.front().findings.push_back(std::move(f));
  }
  r.detail = fmt::format("{} events in the lookback: {}\n", what, total);
  for (const Event& e : newest) r.detail += "  " + e.message + "\n";
  if (total > newest.size()) r.detail += fmt::format("  ... {} older\n", total - newest.size());
  return r;
}

CheckResult error_component_check(
    const ComponentContext& ctx, std::string_view component, std::string_view what, TimePoint since,
    TimePoint now,
    const std::function<ErrorVerdict(const std::vector<Event>&, const std::vector<TimePoint>&)>&
        evaluate) {
  const std::string_view code_key = component == kXidComponent ? "xid" : "sxid";
  auto h = kernel_log_digest(ctx, component, since, error_record_key_paths(code_key),
                             kErrorDetailEvents);
  if (!h) {
    const KernelLogVerdict unreadable = unreadable_history(h.error());
    ErrorVerdict v;
    v.health = unreadable.health;
    v.reason = unreadable.reason;
    return error_check_result(component, v, what, 0, {}, now);
  }
  return error_check_result(component, evaluate(h->digest.events, h->reboots), what,
                            h->digest.total, h->newest, now);
}

ErrorVerdict evaluate_xid(const std::vector<Event>& events, const std::vector<TimePoint>& reboots,
                          const RebootThresholds& thresholds, bool row_remapping) {
  return evaluate(events, reboots, thresholds, "xid", row_remapping);
}

ErrorVerdict evaluate_sxid(const std::vector<Event>& events, const std::vector<TimePoint>& reboots,
                           const RebootThresholds& thresholds) {
  return evaluate(events, reboots, thresholds, "sxid", false);
}

void attribute_xid_process(kmsg::Match& m, const kmsg::MatchTime& t, const host::HostFs& fs,
                           const runtimes::ContainerDirectory* containers, bool daemon,
                           bool saved_log) {
  if (saved_log) return;
  if (daemon && (!t.wall || t.now - *t.wall > kXidAttributionMaxAge)) return;
  const auto& pid_json = m.extra_info.find("pid");
  if (pid_json != m.extra_info.end() && pid_json->is_number_integer() && t.boot_offset_us) {
    const int64_t pid = pid_json->get<int64_t>();
    // The line's time since boot is what the process's start time compares with; a line without
    // it cannot rule out a reused pid.
    const auto started = pid > 0 && pid <= std::numeric_limits<uint32_t>::max()
                             ? runtimes::process_start_seconds(fs, static_cast<uint32_t>(pid))
                             : std::nullopt;
    constexpr double kClockSlackS = 1.0;  // the kernel's start time is in clock ticks
    if (started && *started <= static_cast<double>(*t.boot_offset_us) / 1e6 + kClockSlackS)
      if (auto a = runtimes::attribute_pid(fs, containers, static_cast<uint32_t>(pid))) {
        runtimes::add_attribution(*a, m.extra_info);
        return;
      }
  }
  // No process to follow (the line names none, or it is gone): the pod the kubelet allocated the
  // GPU to (pod-resources), where the GPU's UUID is known.
  const std::string uuid = m.extra_info.value("gpu_uuid", std::string());
  if (containers == nullptr || uuid.empty()) return;
  if (auto holder = containers->find_device(uuid)) {
    runtimes::Attribution a;
    a.container = holder->container;
    a.pod = holder->pod_name;
    a.pod_namespace = holder->pod_namespace;
    a.source = holder->source;
    runtimes::add_attribution(a, m.extra_info);
  }
}

XidComponent::XidComponent(const ComponentContext& ctx)
    : Component(ctx), fs_(ctx.config->host_root) {}

bool XidComponent::supported() const {
  return nvidia_kernel_log_supported(ctx(), kXidComponent, has_events_);
}

void XidComponent::annotate_kernel_log_match(kmsg::Match& m, const kmsg::MatchTime& t) const {
  attribute_xid_process(m, t, fs_, ctx().containers, !ctx().scan_mode, ctx().kernel_log_scan);
}

bool XidComponent::row_remapping() const {
  nvml::NvidiaSource* src = ctx().nvidia;
  if (src == nullptr || src->status() != nvml::NvmlStatus::kReady) return false;
  // The product is all this needs, and it does not change: the daemon reads the last good
  // snapshot, so that a check triggered by an Xid line never waits on an NVML collection (nor on
  // a hung driver). A scan has no earlier snapshot and collects.
  std::shared_ptr<const nvml::NvmlSnapshot> snap;
  if (ctx().scan_mode) {
    if (auto fresh = src->snapshot(); fresh) snap = *fresh;
  } else {
    snap = src->last_good_snapshot();
  }
  return snap != nullptr && caps_of(*snap).row_remapping;
}

CheckResult XidComponent::check() {
  const TimePoint now = Clock::now();
  const TimePoint since = lookback_start(ctx(), config().xid_lookback, now);
  return error_component_check(ctx(), kXidComponent, "XIDComponent", since, now,
                               [&](const auto& events, const auto& reboots) {
                                 return evaluate_xid(events, reboots, config().xid_thresholds,
                                                     row_remapping());
                               });
}

// ---- kernel-log rules ------------------------------------------------------------------------

namespace {

constexpr std::string_view kXidErrorsTotal = "accelerator_nvidia_xid_errors_total";
// The code of the latest Xid recorded per GPU (dcgm-exporter's DCGM_FI_DEV_XID_ERRORS is this
// value; PromQL cannot turn the counter's xid label into one).
constexpr std::string_view kXidLastCode = "accelerator_nvidia_xid_last_code";

nlohmann::json actions_json(const std::vector<RepairAction>& acts) {
  auto a = nlohmann::json::array();
  for (auto r : acts) a.push_back(std::string(to_string(r)));
  return a;
}

// "PCI:0000:3b:00" as the kernel prints it (no function).
std::string device_id(const std::string& bdf) {
  std::string d = bdf;
  if (d.size() > 2 && d[d.size() - 2] == '.') d.resize(d.size() - 2);
  return "PCI:" + d;
}

std::optional<kmsg::Match> match_xid_line(std::string_view s) {
  using kmsg::contains;
  const re2::StringPiece in(s.data(), s.size());
  if (contains(s, "Xid (")) {
    static const RE2 kNvlink(
        std::string(kmsg::kMessageStart) +
        R"(NVRM: Xid \(PCI:([0-9a-fA-F:.]+)\): (\d+)(?:, pid=(?:\d+|'<unknown>'), name=[^,]+)?, )"
        R"(([A-Z_]+(?:/[A-Z_]+)?)\s+(Nonfatal|Fatal)\s+XC[01]\s+i\d+\s+Link\s+(-?\d+)\s+)"
        R"(\((0x[0-9a-fA-F]+)\s+(0x[0-9a-fA-F]+))");
    std::string pci, unit, sev, intr, status;
    int code = 0, link = 0;
    // An NVLink field wider than 32 bits cannot be decoded: the line is still an Xid (below), with
    // the fields marked invalid.
    bool nvlink_fields_invalid = false;
    if (RE2::PartialMatch(in, kNvlink, &pci, &code, &unit, &sev, &link, &intr, &status)) {
      const auto intrinfo = parse_integer<uint32_t>(intr, 16);
      const auto err = parse_integer<uint32_t>(status, 16);
      if (intrinfo && err) {
        const auto nv = catalog::decode_nvlink(code, unit, *intrinfo, *err, sev == "Fatal");
        nlohmann::json extra = {{"unit", unit},
                                {"log_severity", sev},
                                {"link", link},
                                {"intrinfo", *intrinfo},
                                {"error_status", *err}};
        return xid_match(code, pci, s, nv, std::move(extra));
      }
      nvlink_fields_invalid = true;
    }
    static const RE2 kStd(std::string(kmsg::kMessageStart) +
                          R"(NVRM: Xid \((?:PCI:)?([0-9a-fA-F:.]+)((?: [^)]*)?)\):\s*(\d+))");
    std::string rest;
    if (RE2::PartialMatch(in, kStd, &pci, &rest, &code)) {
      nlohmann::json extra = nlohmann::json::object();
      if (nvlink_fields_invalid) extra["nvlink_fields_invalid"] = true;
      static const RE2 kGi(R"(GPU-I:(\d+))");
      int gi = 0;
      if (!rest.empty() && RE2::PartialMatch(rest, kGi, &gi)) extra["gpu_instance"] = gi;
      static const RE2 kPid(R"(, pid=('<unknown>'|\d+), name=([^,]*),)");
      std::string pid, name;
      if (RE2::PartialMatch(in, kPid, &pid, &name)) {
        if (pid.front() != '\'') {
          // A pid that does not fit is kept out of the event and marked, not trusted.
          if (auto v = parse_integer<int64_t>(pid))
            extra["pid"] = *v;
          else
            extra["pid_invalid"] = true;
        }
        if (name != "<unknown>") extra["process_name"] = kmsg::sanitize_utf8(name);
      }
      return xid_match(code, pci, s, std::nullopt, std::move(extra));
    }
  }
  if (contains(s, "fallen off the bus")) {
    static const RE2 kSingle(
        std::string(kmsg::kMessageStart) +
        R"(NVRM:\s+GPU ((?:[0-9a-fA-F]{4}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2})\.0:\s+GPU has fallen off the bus)");
    static const RE2 kMulti(
        "(?s)" + std::string(kmsg::kMessageStart) +
        R"(NVRM:\s+The NVIDIA GPU ((?:[0-9a-fA-F]{4}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2})\.0.*?fallen off the bus and is not responding to commands)");
    // Drivers that print no Xid line with it: "NVRM: GPU at PCI:0000:b3:00: GPU has fallen off the
    // bus." and "NVRM: GPU at 0000:b3:00.0 has fallen off the bus.". When an Xid 79 line comes
    // too, both make the same event, which the event pipeline's deduper keeps once.
    static const RE2 kAt(
        std::string(kmsg::kMessageStart) +
        R"(NVRM:\s+GPU at (?:PCI:)?((?:[0-9a-fA-F]{4}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2})(?:\.[0-7])?:?\s+(?:GPU )?has fallen off the bus)");
    std::string bdf;
    if (RE2::PartialMatch(in, kSingle, &bdf) || RE2::PartialMatch(in, kAt, &bdf) ||
        RE2::PartialMatch(in, kMulti, &bdf)) {
      kmsg::Match m = xid_match(79, bdf, s);
      m.companion = true;
      return m;
    }
  }
  return std::nullopt;
}

// "NVRM: The NVIDIA GPU 0000:3b:00.0" ... up to five lines later "fallen off the bus and is not
// responding to commands.": Xid 79.
class FallenOffTheBus : public kmsg::LineSequence {
 public:
  std::optional<kmsg::Match> feed(std::string_view s) override {
    using kmsg::contains;
    std::optional<kmsg::Match> out;
    if (lines_left_ > 0) {
      --lines_left_;
      static const RE2 kEnd(std::string(kmsg::kMessageStart) +
                            R"(NVRM:.*fallen off the bus and is not responding)");
      if (contains(s, "fallen off the bus and is not responding") &&
          RE2::PartialMatch(re2::StringPiece(s.data(), s.size()), kEnd)) {
        // A message holding both lines is the single-line rule's.
        if (!contains(s, "The NVIDIA GPU")) {
          out = xid_match(79, bdf_, s);
          out->companion = true;
        }
        lines_left_ = 0;
      }
    }
    if (contains(s, "The NVIDIA GPU") && !contains(s, "fallen off the bus")) {
      static const RE2 kStart(
          std::string(kmsg::kMessageStart) +
          R"(NVRM:\s+The NVIDIA GPU ((?:[0-9a-fA-F]{4}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2})\.0)");
      if (RE2::PartialMatch(re2::StringPiece(s.data(), s.size()), kStart, &bdf_)) lines_left_ = 5;
    }
    return out;
  }
  bool pending() const override { return lines_left_ > 0; }

 private:
  std::string bdf_;
  int lines_left_ = 0;
};

}  // namespace

kmsg::Match xid_match(int code, std::string_view raw_pci, std::string_view line,
                      const std::optional<catalog::NvlinkDecoded>& nv, nlohmann::json extra) {
  const auto info = catalog::lookup_xid(code);
  const std::string bdf = normalize_pci_bus_id(raw_pci);
  const std::string dev = device_id(bdf);
  EventType type = info.type;
  std::vector<RepairAction> actions = info.repair_actions;
  std::string description = info.description;
  extra["pci_bus_id"] = bdf;
  extra["device_id"] = dev;
  extra["xid"] = code;
  extra["mnemonic"] = info.mnemonic;
  extra["known"] = info.known;
  std::string head = "XID " + std::to_string(code);
  if (nv) {
    type = nv->type;
    actions = {nv->action};
    if (!nv->description.empty()) description = nv->description;
    extra["sub_code"] = nv->sub_code;
    extra["investigatory_hint"] = nv->investigatory_hint;
    if (nv->rule != nullptr) extra["severity"] = std::string(nv->rule->severity);
    head += "." + std::to_string(nv->sub_code);
    head += fmt::format(" (err status 0x{:08x})", extra.value("error_status", 0u));
  }
  extra["description"] = description;
  extra["event_type"] = std::string(to_string(type));
  extra["repair_actions"] = actions_json(actions);
  extra["reboot_class"] = !actions.empty() && actions.front() == RepairAction::kRebootSystem;
  if (!line.empty()) extra["log_line"] = kmsg::log_line_excerpt(line);
  std::string msg = head;
  if (!info.mnemonic.empty()) msg += " " + info.mnemonic;
  msg += " " + description + " detected on GPU " + dev;
  kmsg::Match m;
  m.component = std::string(kXidComponent);
  m.name = "error_xid";
  m.type = type;
  m.message = kmsg::sanitize_utf8(msg);
  m.extra_info = std::move(extra);
  return m;
}

kmsg::Match nvml_xid_match(int code, std::string_view pci_bus_id, std::string_view uuid) {
  kmsg::Match m = xid_match(code, pci_bus_id.empty() ? "0000:00:00.0" : pci_bus_id, "");
  m.extra_info["source"] = "nvml";
  if (!uuid.empty()) m.extra_info["gpu_uuid"] = std::string(uuid);
  return m;
}

kmsg::ComponentRules xid_kernel_log_rules() {
  kmsg::ComponentRules r;
  r.component = std::string(kXidComponent);
  r.lines.push_back({{{"NVRM: Xid (", " Xid ("}, {"fallen off the bus"}}, match_xid_line});
  r.sequences.push_back(
      {{{"The NVIDIA GPU", "IA GPU"}}, [] { return std::make_unique<FallenOffTheBus>(); }});
  r.describe_metrics = [](MetricRegistry& m) {
    m.describe(kXidErrorsTotal, "NVIDIA Xid errors recorded, by GPU and code",
               MetricKind::kCounter);
    m.describe(kXidLastCode,
               "Code of the latest NVIDIA Xid error recorded on each GPU since gpud started");
  };
  // `type` is the event's own type (the catalog's, or the decoded NVLink Xid 144-150 severity), so
  // that an alert on fatal Xids needs no list of codes.
  r.count = [](MetricRegistry& metrics, const kmsg::StoredMatch& s) {
    if (!s.match.extra_info.contains("xid")) return;
    const int code = s.match.extra_info.value("xid", 0);
    const std::string uuid(s.uuid), bus(s.bus_label);
    Labels labels{{"uuid", uuid},
                  {"pci_bus_id", bus},
                  {"xid", std::to_string(code)},
                  {"type", std::string(to_string(s.match.type))}};
    // A fault gpud injected (POST /inject-fault) is counted apart: alerts leave it out.
    if (kmsg::marked_injected(s.match.extra_info)) labels["injected"] = "true";
    metrics.add(kXidComponent, kXidErrorsTotal, 1, labels);
    metrics.set(kXidComponent, kXidLastCode, code, {{"uuid", uuid}, {"pci_bus_id", bus}});
  };
  return r;
}

}  // namespace gpud::components
