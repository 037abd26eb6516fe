#include "components/nvidia/pcie.h"

#include <cmath>

#include "components/nvidia/gpu_issues.h"

namespace gpud::components {

uint64_t pcie_replay_budget(uint32_t gen, uint32_t lanes, std::chrono::seconds elapsed) {
  static constexpr double kRate[] = {0.15, 0.30, 0.48, 0.96, 1.92, 3.84};
  uint32_t i = std::clamp<uint32_t>(gen, 1, 6) - 1;
  double minutes = static_cast<double>(elapsed.count()) / 60.0;
  return static_cast<uint64_t>(std::ceil(kRate[i] * lanes * minutes));
}

CheckResult evaluate_pcie(const nvml::NvmlSnapshot& snapshot,
                          const std::map<std::string, PcieReplaySample>& previous) {
  nlohmann::json gpus = nlohmann::json::array();
  std::vector<std::vector<std::string>> rows = {
      {"GPU", "UUID", "GEN", "MAX GEN", "WIDTH", "MAX WIDTH", "REPLAYS"}};
  std::string issues;
  size_t supported = 0;
  auto add = [&issues](const std::string& s) { issues += (issues.empty() ? "" : "; ") + s; };
  auto str = [](const nvml::Field<uint32_t>& f) {
    return f.ok() ? std::to_string(f.value) : std::string(f.supported() ? "error" : "n/a");
  };
  for (const auto& g : snapshot.gpus) {
    const auto& p = g.pcie;
    nlohmann::json j = {{"uuid", g.uuid.value}, {"bus_id", g.pci_bus_id.value}};
    if (p.gen_current.ok()) j["link_gen_current"] = p.gen_current.value;
    if (p.gen_max.ok()) j["link_gen_max"] = p.gen_max.value;
    if (p.width_current.ok()) j["link_width_current"] = p.width_current.value;
    if (p.width_max.ok()) j["link_width_max"] = p.width_max.value;
    if (p.replay_counter.ok()) j["replay_counter"] = p.replay_counter.value;
    rows.push_back({std::to_string(g.index), g.uuid.value, str(p.gen_current), str(p.gen_max),
                    str(p.width_current), str(p.width_max), str(p.replay_counter)});
    if (p.gen_current.supported() || p.width_current.supported()) ++supported;

    if (p.width_current.ok() && p.width_max.ok() && p.width_current.value < p.width_max.value)
      add(gpu_label(g) + ": PCIe link width x" + std::to_string(p.width_current.value) +
          " below max x" + std::to_string(p.width_max.value));
    if (p.gen_current.ok() && p.gen_max.ok() && p.gen_current.value < p.gen_max.value) {
      bool busy = g.utilization.ok() && g.utilization.value.gpu_percent > 0;
      j["link_gen_below_max_at_idle"] = !busy;
      if (busy)
        add(gpu_label(g) + ": PCIe link gen " + std::to_string(p.gen_current.value) +
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
          add(gpu_label(g) + ": PCIe replay counter grew by " + std::to_string(delta) + " in " +
              std::to_string(elapsed.count()) + "s, above the budget of " + std::to_string(budget) +
              " (gen " + std::to_string(p.gen_current.value) + " x" +
              std::to_string(p.width_current.value) + ")");
      }
    }
    for (const auto* f :
         {&p.gen_current, &p.gen_max, &p.width_current, &p.width_max, &p.replay_counter}) {
      if (f->status == nvml::FieldStatus::kError) {
        add(gpu_label(g) + ": " + f->error);
        break;
      }
    }
    gpus.push_back(j);
  }
  nlohmann::json data = {{"gpus", gpus}};
  std::string detail = format_table(rows);
  if (!issues.empty())
    return data_result(kPcieName, Health::kDegraded, issues, data, detail,
                       SuggestedActions{"check the GPU's PCIe slot, riser and cabling",
                                        {RepairAction::kHardwareInspection}});
  return data_result(kPcieName, Health::kHealthy,
                     supported == 0 ? "PCIe link information not supported (not applicable)"
                                    : "PCIe links at max generation and width on " +
                                          std::to_string(supported) + " GPU(s)",
                     data, detail);
}

CheckResult PcieComponent::evaluate(const nvml::NvmlSnapshot& snapshot) {
  auto* m = ctx().metrics;
  m->describe("accelerator_nvidia_pcie_link_gen", "Current PCIe link generation");
  m->describe("accelerator_nvidia_pcie_link_width", "Current PCIe link width (lanes)");
  m->describe("accelerator_nvidia_pcie_replay_errors", "PCIe replay counter", MetricKind::kCounter);
  for (const auto& g : snapshot.gpus) {
    Labels l = gpu_labels(g);
    if (g.pcie.gen_current.ok())
      m->set(kPcieName, "accelerator_nvidia_pcie_link_gen", g.pcie.gen_current.value, l);
    if (g.pcie.width_current.ok())
      m->set(kPcieName, "accelerator_nvidia_pcie_link_width", g.pcie.width_current.value, l);
    if (g.pcie.replay_counter.ok())
      m->set(kPcieName, "accelerator_nvidia_pcie_replay_errors", g.pcie.replay_counter.value, l);
  }
  auto r = evaluate_pcie(snapshot, previous_);
  // The shared snapshot is cached for a few seconds: only a newer one moves the window.
  for (const auto& g : snapshot.gpus) {
    if (!g.pcie.replay_counter.ok()) continue;
    auto& prev = previous_[g.uuid.value];
    if (snapshot.time > prev.time) prev = {g.pcie.replay_counter.value, snapshot.time};
  }
  return r;
}

}  // namespace gpud::components
