#include "components/nvidia/ecc.h"

#include <fmt/format.h>

namespace gpud::components {

namespace {

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

// NVML's counts are already cumulative: the counters are set to them.
constexpr GpuMetric kMetrics[] = {
    {"accelerator_nvidia_ecc_aggregate_total_corrected",
     "Corrected ECC errors over the GPU's lifetime", MetricKind::kCounter,
     read_metric<&nvml::GpuSnapshot::ecc_total, &nvml::EccCounts::aggregate_corrected>},
    {"accelerator_nvidia_ecc_aggregate_total_uncorrected",
     "Uncorrected ECC errors over the GPU's lifetime", MetricKind::kCounter,
     read_metric<&nvml::GpuSnapshot::ecc_total, &nvml::EccCounts::aggregate_uncorrected>},
    {"accelerator_nvidia_ecc_volatile_total_corrected",
     "Corrected ECC errors since the last driver load", MetricKind::kCounter,
     read_metric<&nvml::GpuSnapshot::ecc_total, &nvml::EccCounts::volatile_corrected>},
    {"accelerator_nvidia_ecc_volatile_total_uncorrected",
     "Uncorrected ECC errors since the last driver load", MetricKind::kCounter,
     read_metric<&nvml::GpuSnapshot::ecc_total, &nvml::EccCounts::volatile_uncorrected>},
};

}  // namespace

NvidiaVerdict evaluate_ecc(const nvml::NvmlSnapshot& snapshot) {
  NvidiaVerdict v;
  v.action_description =
      "volatile uncorrectable ECC errors: reboot the system (GPU reset) to retire or remap the "
      "affected memory";
  v.columns = {"ECC", "VOL CORR", "VOL UNCORR", "AGG CORR", "AGG UNCORR"};
  int applicable = 0;
  for (const auto& g : snapshot.gpus) {
    GpuRow& row = v.gpus.emplace_back(g);
    nlohmann::json& j = row.data;
    std::string mode = "n/a";
    if (v.usable(g, g.ecc_mode, "ECC mode")) {
      mode = g.ecc_mode.value.current ? "on" : "off";
      j["ecc_mode"] = {{"enabled_current", g.ecc_mode.value.current},
                       {"enabled_pending", g.ecc_mode.value.pending},
                       {"supported", true}};
    } else {
      j["ecc_mode"] = {{"supported", g.ecc_mode.supported()}};
      if (g.ecc_mode.supported()) mode = "error";
    }
    j["supported"] = g.ecc_total.supported();
    row.cells = {mode};
    if (v.usable(g, g.ecc_total, "ECC error counts")) {
      ++applicable;
      const nvml::EccCounts& c = g.ecc_total.value;
      j["total"] = counts_json(c);
      nlohmann::json locations = nlohmann::json::object();
      for (int i = 0; i < nvml::kMemoryLocationCount; ++i) {
        const auto& f = g.ecc_by_location[static_cast<size_t>(i)];
        if (v.usable(g, f, std::string("ECC errors in ") + kLocations[i]))
          locations[kLocations[i]] = counts_json(f.value);
      }
      j["locations"] = locations;
      for (uint64_t n : {c.volatile_corrected, c.volatile_uncorrected, c.aggregate_corrected,
                         c.aggregate_uncorrected})
        row.cells.push_back(std::to_string(n));
      if (c.volatile_uncorrected > 0) {
        std::string where;
        for (int i = 0; i < nvml::kMemoryLocationCount; ++i) {
          const auto& f = g.ecc_by_location[static_cast<size_t>(i)];
          if (f.ok() && f.value.volatile_uncorrected > 0)
            where += (where.empty() ? " in " : ", ") + std::string(kLocations[i]);
        }
        v.add(g, Health::kUnhealthy,
              fmt::format("{} has {} volatile uncorrectable ECC error(s){}", gpu_label(g),
                          c.volatile_uncorrected, where),
              RepairAction::kRebootSystem);
      }
    } else {
      row.cells.resize(v.columns.size(), unread_text(g.ecc_total));
    }
  }
  v.healthy_reason = applicable == 0
                         ? "ECC not supported (not applicable)"
                         : "all " + std::to_string(snapshot.gpus.size()) +
                               " GPU(s) were checked, no volatile uncorrectable ECC error found";
  return v;
}

EccComponent::EccComponent(const ComponentContext& ctx) : NvidiaComponent(ctx, kMetrics) {}

CheckResult EccComponent::evaluate(const nvml::NvmlSnapshot& snapshot) {
  return render_verdict(name(), evaluate_ecc(snapshot));
}

}  // namespace gpud::components
