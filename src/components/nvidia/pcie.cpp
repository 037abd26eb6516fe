#include "components/nvidia/pcie.h"

#include <cmath>

namespace gpud::components {

namespace {
constexpr GpuMetric kMetrics[] = {
    {"accelerator_nvidia_pcie_link_gen", "Current PCIe link generation", MetricKind::kGauge,
     [](const nvml::GpuSnapshot& g) { return metric_value(g.pcie.gen_current); }},
    {"accelerator_nvidia_pcie_link_width", "Current PCIe link width (lanes)", MetricKind::kGauge,
     [](const nvml::GpuSnapshot& g) { return metric_value(g.pcie.width_current); }},
    {"accelerator_nvidia_pcie_replay_errors", "PCIe replay counter", MetricKind::kCounter,
     [](const nvml::GpuSnapshot& g) { return metric_value(g.pcie.replay_counter); }},
};
}  // namespace

uint64_t pcie_replay_budget(uint32_t gen, uint32_t lanes, std::chrono::seconds elapsed) {
  static constexpr double kRate[] = {0.15, 0.30, 0.48, 0.96, 1.92, 3.84};
  uint32_t i = std::clamp<uint32_t>(gen, 1, 6) - 1;
  double minutes = static_cast<double>(elapsed.count()) / 60.0;
  return static_cast<uint64_t>(std::ceil(kRate[i] * lanes * minutes));
}

NvidiaVerdict evaluate_pcie(const nvml::NvmlSnapshot& snapshot,
                            const std::map<std::string, PcieReplaySample>& previous) {
  NvidiaVerdict v;
  v.action_description = "check the GPU's PCIe slot, riser and cabling";
  v.columns = {"UUID", "GEN", "MAX GEN", "WIDTH", "MAX WIDTH", "REPLAYS"};
  size_t supported = 0;
  // Every PCIe finding, an NVML error too, is Degraded and asks for an inspection.
  auto add = [&v](const nvml::GpuSnapshot& g, std::string reason) {
    v.add(g, Health::kDegraded, std::move(reason), RepairAction::kHardwareInspection);
  };
  for (const auto& g : snapshot.gpus) {
    const auto& p = g.pcie;
    GpuRow& row = v.gpus.emplace_back(
        g.index, nlohmann::json{{"uuid", g.uuid.value}, {"bus_id", g.pci_bus_id.value}});
    nlohmann::json& j = row.data;
    if (p.gen_current.ok()) j["link_gen_current"] = p.gen_current.value;
    if (p.gen_max.ok()) j["link_gen_max"] = p.gen_max.value;
    if (p.width_current.ok()) j["link_width_current"] = p.width_current.value;
    if (p.width_max.ok()) j["link_width_max"] = p.width_max.value;
    if (p.replay_counter.ok()) j["replay_counter"] = p.replay_counter.value;
    row.cells = {g.uuid.value,
                 field_text(p.gen_current),
                 field_text(p.gen_max),
                 field_text(p.width_current),
                 field_text(p.width_max),
                 field_text(p.replay_counter)};
    if (p.gen_current.supported() || p.width_current.supported()) ++supported;

    if (p.width_current.ok() && p.width_max.ok() && p.width_current.value < p.width_max.value)
      add(g, gpu_label(g) + ": PCIe link width x" + std::to_string(p.width_current.value) +
                 " below max x" + std::to_string(p.width_max.value));
    if (p.gen_current.ok() && p.gen_max.ok() && p.gen_current.value < p.gen_max.value) {
      bool busy = g.utilization.ok() && g.utilization.value.gpu_percent > 0;
      j["link_gen_below_max_at_idle"] = !busy;
      if (busy)
        add(g, gpu_label(g) + ": PCIe link gen " + std::to_string(p.gen_current.value) +
                   " below max gen " + std::to_string(p.gen_max.value) + " while busy");
    }
    if (p.replay_counter.ok() && p.gen_current.ok() && p.width_current.ok()) {
      auto it = previous.find(g.uuid.value);
      if (it != previous.end() && p.replay_counter.value >= it->second.counter &&
          snapshot.time > it->second.time) {
        auto elapsed =
            std::chrono::duration_cast<std::chrono::seconds>(snapshot.time - it->second.time);
        elapsed = std::max(elapsed, std::chrono::seconds(1));
        uint64_t delta = p.replay_counter.value - it->second.counter;
        uint64_t budget = pcie_replay_budget(p.gen_current.value, p.width_current.value, elapsed);
        j["replay_delta"] = delta;
        j["replay_budget"] = budget;
        if (delta > budget)
          add(g, gpu_label(g) + ": PCIe replay counter grew by " + std::to_string(delta) + " in " +
                     std::to_string(elapsed.count()) + "s, above the budget of " +
                     std::to_string(budget) + " (gen " + std::to_string(p.gen_current.value) +
                     " x" + std::to_string(p.width_current.value) + ")");
      }
    }
    for (const auto* f :
         {&p.gen_current, &p.gen_max, &p.width_current, &p.width_max, &p.replay_counter}) {
      if (f->status == nvml::FieldStatus::kError) {
        add(g, gpu_label(g) + ": " + f->error);
        break;
      }
    }
  }
  v.healthy_reason = supported == 0 ? "PCIe link information not supported (not applicable)"
                                    : "PCIe links at max generation and width on " +
                                          std::to_string(supported) + " GPU(s)";
  return v;
}

PcieComponent::PcieComponent(const ComponentContext& ctx) : NvidiaComponent(ctx, kMetrics) {}

CheckResult PcieComponent::evaluate(const nvml::NvmlSnapshot& snapshot) {
  auto v = evaluate_pcie(snapshot, previous_);
  // The shared snapshot is cached for a few seconds: only a newer one moves the window.
  for (const auto& g : snapshot.gpus) {
    if (!g.pcie.replay_counter.ok()) continue;
    auto& prev = previous_[g.uuid.value];
    if (snapshot.time > prev.time) prev = {g.pcie.replay_counter.value, snapshot.time};
  }
  return render_verdict(name(), v);
}

}  // namespace gpud::components
