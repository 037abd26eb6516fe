#include "components/nvidia/ecc.h"

#include <fmt/format.h>

#include "components/nvidia/gpu_issues.h"

namespace gpud::components {

namespace {
constexpr const char* kName = "accelerator-nvidia-ecc";
constexpr const char* kAggCorrected = "accelerator_nvidia_ecc_aggregate_total_corrected";
constexpr const char* kAggUncorrected = "accelerator_nvidia_ecc_aggregate_total_uncorrected";
constexpr const char* kVolCorrected = "accelerator_nvidia_ecc_volatile_total_corrected";
constexpr const char* kVolUncorrected = "accelerator_nvidia_ecc_volatile_total_uncorrected";

// nvmlMemoryLocation_t order.
constexpr const char* kLocations[nvml::kMemoryLocationCount] = {
    "l1_cache",           "l2_cache",      "dram", "gpu_register_file",
    "gpu_texture_memory", "shared_memory", "cbu",  "sram"};

nlohmann::json counts_json(const nvml::EccCounts& c) {
  return {
      {"volatile", {{"corrected", c.volatile_corrected}, {"uncorrected", c.volatile_uncorrected}}},
      {"aggregate",
       {{"corrected", c.aggregate_corrected}, {"uncorrected", c.aggregate_uncorrected}}}};
}
}  // namespace

CheckResult evaluate_ecc(const nvml::NvmlSnapshot& snapshot) {
  GpuIssues issues;
  nlohmann::json gpus = nlohmann::json::array();
  std::vector<std::vector<std::string>> rows = {
      {"GPU", "ECC", "VOL CORR", "VOL UNCORR", "AGG CORR", "AGG UNCORR"}};
  int applicable = 0;
  for (const auto& g : snapshot.gpus) {
    nlohmann::json j = gpu_identity_json(g);
    std::string mode = "n/a";
    if (issues.usable(g, g.ecc_mode, "ECC mode")) {
      mode = g.ecc_mode.value.current ? "on" : "off";
      j["ecc_mode"] = {{"enabled_current", g.ecc_mode.value.current},
                       {"enabled_pending", g.ecc_mode.value.pending},
                       {"supported", true}};
    } else {
      j["ecc_mode"] = {{"supported", g.ecc_mode.supported()}};
      if (g.ecc_mode.supported()) mode = "error";
    }
    j["supported"] = g.ecc_total.supported();
    std::vector<std::string> row = {std::to_string(g.index), mode};
    if (issues.usable(g, g.ecc_total, "ECC error counts")) {
      ++applicable;
      const nvml::EccCounts& c = g.ecc_total.value;
      j["total"] = counts_json(c);
      nlohmann::json locations = nlohmann::json::object();
      for (int i = 0; i < nvml::kMemoryLocationCount; ++i) {
        const auto& f = g.ecc_by_location[static_cast<size_t>(i)];
        if (issues.usable(g, f, std::string("ECC errors in ") + kLocations[i]))
          locations[kLocations[i]] = counts_json(f.value);
      }
      j["locations"] = locations;
      for (uint64_t v : {c.volatile_corrected, c.volatile_uncorrected, c.aggregate_corrected,
                         c.aggregate_uncorrected})
        row.push_back(std::to_string(v));
      if (c.volatile_uncorrected > 0) {
        std::string where;
        for (int i = 0; i < nvml::kMemoryLocationCount; ++i) {
          const auto& f = g.ecc_by_location[static_cast<size_t>(i)];
          if (f.ok() && f.value.volatile_uncorrected > 0)
            where += (where.empty() ? " in " : ", ") + std::string(kLocations[i]);
        }
        issues.add(Health::kUnhealthy,
                   fmt::format("{} has {} volatile uncorrectable ECC error(s){}", gpu_label(g),
                               c.volatile_uncorrected, where),
                   RepairAction::kRebootSystem);
      }
    } else {
      std::string t = g.ecc_total.supported() ? "error" : "n/a";
      row.insert(row.end(), {t, t, t, t});
    }
    gpus.push_back(std::move(j));
    rows.push_back(std::move(row));
  }
  std::string healthy = applicable == 0
                            ? "ECC not supported (not applicable)"
                            : "all " + std::to_string(snapshot.gpus.size()) +
                                  " GPU(s) were checked, no volatile uncorrectable ECC error found";
  auto r = issues.result(kName, healthy, {{"gpus", gpus}}, format_table(rows));
  if (r.states[0].suggested_actions)
    r.states[0].suggested_actions->description =
        "volatile uncorrectable ECC errors: reboot the system (GPU reset) to retire or remap the "
        "affected memory";
  return r;
}

EccComponent::EccComponent(const ComponentContext& ctx) : NvidiaComponent(ctx) {
  if (ctx.metrics == nullptr) return;
  MetricRegistry& m = *ctx.metrics;
  m.describe(kAggCorrected, "Corrected ECC errors over the GPU's lifetime", MetricKind::kCounter);
  m.describe(kAggUncorrected, "Uncorrected ECC errors over the GPU's lifetime",
             MetricKind::kCounter);
  m.describe(kVolCorrected, "Corrected ECC errors since the last driver load",
             MetricKind::kCounter);
  m.describe(kVolUncorrected, "Uncorrected ECC errors since the last driver load",
             MetricKind::kCounter);
}

CheckResult EccComponent::evaluate(const nvml::NvmlSnapshot& snapshot) {
  if (MetricRegistry* m = ctx().metrics) {
    for (const auto& g : snapshot.gpus) {
      if (!g.ecc_total.ok()) continue;
      Labels l = gpu_labels(g);
      const nvml::EccCounts& c = g.ecc_total.value;
      // NVML's counts are already cumulative: the counter is set to them.
      m->set(kName, kAggCorrected, static_cast<double>(c.aggregate_corrected), l);
      m->set(kName, kAggUncorrected, static_cast<double>(c.aggregate_uncorrected), l);
      m->set(kName, kVolCorrected, static_cast<double>(c.volatile_corrected), l);
      m->set(kName, kVolUncorrected, static_cast<double>(c.volatile_uncorrected), l);
    }
  }
  return evaluate_ecc(snapshot);
}

}  // namespace gpud::components
