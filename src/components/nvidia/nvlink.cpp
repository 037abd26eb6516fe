#include "components/nvidia/nvlink.h"

#include <map>

#include "components/kernel_log_support.h"
#include "components/nvidia/fabric_manager.h"
#include "core/strings.h"
#include "host/os_info.h"

namespace gpud::components {
namespace {

struct GpuLinks {
  bool supported = false;
  bool all_active = false;
  std::vector<unsigned int> inactive;
  uint64_t replay = 0, recovery = 0, crc = 0;
};

GpuLinks summarize(const nvml::GpuSnapshot& g) {
  GpuLinks s;
  if (!g.nvlinks.ok()) return s;
  s.supported = true;
  for (const auto& l : g.nvlinks.value) {
    if (!(l.active.ok() && l.active.value)) s.inactive.push_back(l.link);
    if (l.replay_errors.ok()) s.replay += l.replay_errors.value;
    if (l.recovery_errors.ok()) s.recovery += l.recovery_errors.value;
    if (l.crc_flit_errors.ok()) s.crc += l.crc_flit_errors.value;
  }
  s.all_active = !g.nvlinks.value.empty() && s.inactive.empty();
  return s;
}

// P2P statuses that mean "this platform has no NVLink P2P" rather than a fault: chipset, GPU or
// topology not supported, disabled by a registry key, not supported.
bool expected_p2p_refusal(int status) {
  return status >= nvml::NVML_P2P_STATUS_CHIPSET_NOT_SUPPORTED &&
         status <= nvml::NVML_P2P_STATUS_NOT_SUPPORTED;
}

std::string join_links(const std::vector<unsigned int>& links) {
  std::string s;
  for (auto l : links) s += (s.empty() ? "" : ", ") + std::to_string(l);
  return s;
}

// An error counter summed over the links, for GPUs that support NVLink.
template <uint64_t GpuLinks::*kCount>
std::optional<double> link_errors(const nvml::GpuSnapshot& g) {
  GpuLinks s = summarize(g);
  if (!s.supported) return std::nullopt;
  return static_cast<double>(s.*kCount);
}

constexpr GpuMetric kMetrics[] = {
    {"accelerator_nvidia_nvlink_supported", "1 when the GPU supports NVLink", MetricKind::kGauge,
     [](const nvml::GpuSnapshot& g) -> std::optional<double> {
       return summarize(g).supported ? 1 : 0;
     }},
    {"accelerator_nvidia_nvlink_feature_enabled", "1 when all of the GPU's links are active",
     MetricKind::kGauge,
     [](const nvml::GpuSnapshot& g) -> std::optional<double> {
       return summarize(g).all_active ? 1 : 0;
     }},
    {"accelerator_nvidia_nvlink_replay_errors", "NVLink replay errors (sum over links)",
     MetricKind::kCounter, link_errors<&GpuLinks::replay>},
    {"accelerator_nvidia_nvlink_recovery_errors", "NVLink recovery errors (sum over links)",
     MetricKind::kCounter, link_errors<&GpuLinks::recovery>},
    {"accelerator_nvidia_nvlink_crc_errors", "NVLink CRC flit errors (sum over links)",
     MetricKind::kCounter, link_errors<&GpuLinks::crc>},
};

}  // namespace

NvidiaVerdict evaluate_nvlink(const nvml::NvmlSnapshot& snapshot, int expected_gpus_all_links,
                              const std::vector<Event>& post_rx_detect_failures) {
  NvidiaVerdict v;
  v.columns = {"UUID", "LINKS", "INACTIVE", "REPLAY", "RECOVERY", "CRC", "P2P OK"};
  v.action_description =
      "reboot the system: the links train again at boot; links still down after a reboot need "
      "the NVLink bridges or NVSwitch trays inspected";
  // NVLink P2P over every GPU pair.
  std::map<unsigned int, int> p2p_ok_peers;
  size_t pairs_probed = 0, pairs_ok = 0;
  bool unexpected_p2p_status = false;
  for (const auto& p : snapshot.nvlink_p2p) {
    if (!p.status.ok()) continue;
    ++pairs_probed;
    if (p.status.value == nvml::NVML_P2P_STATUS_OK) {
      ++pairs_ok;
      ++p2p_ok_peers[p.a];
      ++p2p_ok_peers[p.b];
    } else if (!expected_p2p_refusal(p.status.value)) {
      unexpected_p2p_status = true;
    }
  }
  const bool p2p_probed = !snapshot.nvlink_p2p.empty();
  auto p2p_cell = [&](unsigned int gpu) {
    return p2p_probed
               ? std::to_string(p2p_ok_peers[gpu]) + "/" + std::to_string(snapshot.gpus.size() - 1)
               : std::string("-");
  };
  // Which findings stand depends on all GPUs (the cascade below): collected first.
  std::vector<VerdictFinding> errors, inactive;
  int supported = 0, active = 0;
  for (const auto& g : snapshot.gpus) {
    GpuLinks s = summarize(g);
    nlohmann::json links = nlohmann::json::array();
    if (g.nvlinks.ok()) {
      for (const auto& l : g.nvlinks.value) {
        nlohmann::json jl = {{"link", l.link},
                             {"feature_enabled", l.active.ok() && l.active.value}};
        if (l.replay_errors.ok()) jl["replay_errors"] = l.replay_errors.value;
        if (l.recovery_errors.ok()) jl["recovery_errors"] = l.recovery_errors.value;
        if (l.crc_flit_errors.ok()) jl["crc_errors"] = l.crc_flit_errors.value;
        links.push_back(jl);
      }
    }
    GpuRow& row = v.gpus.emplace_back(g.index, nlohmann::json{{"uuid", g.uuid.value},
                                                              {"bus_id", g.pci_bus_id.value},
                                                              {"supported", s.supported},
                                                              {"all_feature_enabled", s.all_active},
                                                              {"links", links}});
    if (p2p_probed) row.data["p2p_ok_peers"] = p2p_ok_peers[g.index];
    if (g.nvlinks.status == nvml::FieldStatus::kError)
      errors.push_back(
          VerdictFinding::about(g, Health::kUnhealthy, gpu_label(g) + ": " + g.nvlinks.error));
    if (!s.supported) {
      row.cells = {g.uuid.value,
                   g.nvlinks.status == nvml::FieldStatus::kError ? "error" : "not supported",
                   "-",
                   "-",
                   "-",
                   "-",
                   p2p_cell(g.index)};
      continue;
    }
    ++supported;
    if (s.all_active) ++active;
    // GPUd's setNVLinkSuggestedActions: inactive links suggest a reboot.
    if (!s.inactive.empty())
      inactive.push_back(VerdictFinding::about(
          g, Health::kDegraded, gpu_label(g) + ": link(s) " + join_links(s.inactive) + " inactive",
          RepairAction::kRebootSystem));
    row.cells = {g.uuid.value,
                 std::to_string(g.nvlinks.value.size()),
                 s.inactive.empty() ? "-" : join_links(s.inactive),
                 std::to_string(s.replay),
                 std::to_string(s.recovery),
                 std::to_string(s.crc),
                 p2p_cell(g.index)};
  }
  v.data = {{"gpus_with_all_links_feature_enabled", active},
            {"expected_gpus_with_all_links_feature_enabled", expected_gpus_all_links}};
  if (p2p_probed)
    v.data["p2p"] = {{"pairs", snapshot.nvlink_p2p.size()},
                     {"pairs_probed", pairs_probed},
                     {"pairs_ok", pairs_ok}};

  if (!post_rx_detect_failures.empty()) {
    v.add(Health::kUnhealthy,
          "NVIDIA driver failed to update an NVLink post-RX-detection link mask (" +
              post_rx_detect_failures.front().message + ")",
          RepairAction::kRebootSystem);
    return v;
  }
  if (!errors.empty()) {
    v.findings = std::move(errors);
    return v;
  }
  // A multi-GPU system of a product built around NVLink (it has a fabric manager or fabric state)
  // where every pair was probed and none reports NVLink P2P.
  const catalog::ProductCaps caps = caps_of(snapshot);
  const bool nvlink_expected =
      snapshot.gpus.size() > 1 && (caps.fabric_manager || caps.fabric_state);
  if (nvlink_expected && p2p_probed && pairs_probed == snapshot.nvlink_p2p.size() &&
      pairs_ok == 0) {
    std::optional<RepairAction> action;
    if (active < supported || unexpected_p2p_status) action = RepairAction::kRebootSystem;
    v.add(Health::kUnhealthy,
          "no GPU pairs report NVLink P2P connectivity on " + std::to_string(snapshot.gpus.size()) +
              "-GPU NVLink-capable system",
          action);
    return v;
  }
  if (expected_gpus_all_links > 0) {
    if (active >= expected_gpus_all_links) {
      v.healthy_reason =
          "nvlink threshold met: " + std::to_string(active) +
          " GPU(s) with all links active (require >=" + std::to_string(expected_gpus_all_links) +
          ")";
      return v;
    }
    std::string reason =
        "nvlink threshold violated: require >=" + std::to_string(expected_gpus_all_links) +
        " GPUs with all links active; got " + std::to_string(active);
    if (!inactive.empty()) {
      std::vector<std::string> parts;
      for (const auto& f : inactive) parts.push_back(f.reason);
      reason += " (" + join(parts, "; ") + ")";
    }
    v.add(Health::kUnhealthy, reason, RepairAction::kRebootSystem);
    return v;
  }
  if (supported == 0) {
    v.healthy_reason = "NVLink not supported (not applicable)";
    return v;
  }
  v.findings = std::move(inactive);
  v.healthy_reason =
      "all NVLink links active on " + std::to_string(active) + " GPU(s) (nvlink threshold not set)";
  return v;
}

NvlinkComponent::NvlinkComponent(const ComponentContext& ctx) : NvidiaComponent(ctx, kMetrics) {}

bool NvlinkComponent::supported() const {
  // Not merely for a GPU on the bus: without NVML the fault owner alone says so.
  return NvidiaComponent::supported() || ctx().kernel_log_scan ||
         has_recorded_events(ctx(), name(), has_events_);
}

Result<std::vector<Event>> NvlinkComponent::post_rx_detect_failures() const {
  // They count since the current boot: only a reboot clears them. A scan of a saved log judges
  // the whole log.
  TimePoint since{};
  if (!ctx().scan_mode)
    since = host::read_boot_time(host::HostFs(config().host_root)).value_or(TimePoint{});
  auto evs = ctx().events->query(kNvlinkName, since, Clock::now() + std::chrono::minutes(1));
  if (!evs) return evs.error();
  std::vector<Event> failures;
  for (auto& e : *evs)
    if (e.name == kNvlinkPostRxDetectEvent) failures.push_back(std::move(e));
  return failures;
}

CheckResult NvlinkComponent::evaluate(const nvml::NvmlSnapshot& snapshot) {
  auto failures = post_rx_detect_failures();
  CheckResult r =
      render_verdict(name(), evaluate_nvlink(snapshot, config().nvlink_expected_gpus_all_links,
                                             failures ? *failures : std::vector<Event>{}));
  if (!failures) merge_verdict(r, unreadable_history(failures.error()));
  return r;
}

void NvlinkComponent::judge_without_snapshot(CheckResult& r) {
  auto failures = post_rx_detect_failures();
  if (!failures) {
    merge_verdict(r, unreadable_history(failures.error()));
  } else if (!failures->empty()) {
    merge_verdict(r, {Health::kUnhealthy,
                      "NVIDIA driver failed to update an NVLink post-RX-detection link mask (" +
                          failures->front().message + ")",
                      SuggestedActions{"reboot the system", {RepairAction::kRebootSystem}}});
  }
}

kmsg::ComponentRules nvlink_kernel_log_rules() {
  kmsg::ComponentRules r;
  r.component = "accelerator-nvidia-nvlink";
  r.lines = {
      kmsg::pattern_rule(
          {{"Rx Detect Link mask", "Detect"}}, "nvlink_post_rx_detect_failure",
          std::string(kmsg::kMessageStart) +
              R"(NVRM: knvlinkUpdatePostRxDetectLinkMask_[A-Za-z0-9_]+: Failed to update Rx Detect Link mask!)",
          "NVIDIA driver failed to update an NVLink post-RX-detection link mask"),
      kmsg::pattern_rule(
          {{"postRxDetLinkMask"}}, "nvlink_post_rx_detect_failure",
          std::string(kmsg::kMessageStart) +
              R"(NVRM: knvlinkDiscoverPostRxDetLinks_[A-Za-z0-9_]+: Getting peer[0-9]+(?:'s)? postRxDetLinkMask failed!)",
          "NVIDIA driver failed to update an NVLink post-RX-detection link mask"),
  };
  return r;
}

}  // namespace gpud::components
