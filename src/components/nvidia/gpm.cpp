#include "components/nvidia/gpm.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

namespace gpud::components {

std::vector<unsigned int> gpm_capable_gpus(const nvml::NvmlSnapshot& snapshot) {
  std::vector<unsigned int> out;
  for (const auto& g : snapshot.gpus)
    if (g.gpm_supported.ok() && g.gpm_supported.value) out.push_back(g.index);
  return out;
}

namespace {

const char* unit_suffix(nvml::GpmUnit unit) {
  return unit == nvml::GpmUnit::kPercent ? "_percent" : "_bytes_per_second";
}

const nvml::GpmMetricSpec* spec_named(std::string_view name) {
  for (const auto& s : nvml::kGpmMetrics)
    if (name == s.name) return &s;
  return nullptr;
}

}  // namespace

std::string gpm_metric_name(const nvml::GpmMetricSpec& spec) {
  return std::string("accelerator_nvidia_gpm_gpu_") + spec.name + unit_suffix(spec.unit);
}

double gpm_metric_value(const nvml::GpmMetricSpec& spec, double nvml_value) {
  constexpr double kBytesPerMebibyte = 1024.0 * 1024.0;
  return spec.unit == nvml::GpmUnit::kPercent ? nvml_value : nvml_value * kBytesPerMebibyte;
}

NvidiaVerdict evaluate_gpm(const nvml::NvmlSnapshot& snapshot,
                           const Result<std::vector<nvml::GpmGpuResult>>* sampled) {
  std::map<unsigned int, const nvml::GpmGpuResult*> by_gpu;
  if (sampled != nullptr && sampled->ok())
    for (const auto& r : **sampled) by_gpu[r.index] = &r;
  NvidiaVerdict v;
  v.columns = {"UUID", "GPM", "SM OCC %", "TENSOR %", "FP32 %", "FP16 %"};
  std::string sampling_errors;
  size_t supported = 0, with_values = 0;
  for (const auto& g : snapshot.gpus) {
    const auto& f = g.gpm_supported;
    bool yes = f.ok() && f.value;
    GpuRow& row = v.gpus.emplace_back(
        g.index,
        nlohmann::json{{"uuid", g.uuid.value}, {"bus_id", g.pci_bus_id.value}, {"supported", yes}});
    row.cells = {
        g.uuid.value,
        yes ? "supported" : (f.status == nvml::FieldStatus::kError ? "error" : "not supported"),
        "-",
        "-",
        "-",
        "-"};
    if (yes) ++supported;
    if (f.status == nvml::FieldStatus::kError)
      v.add(g, Health::kUnhealthy, gpu_label(g) + ": " + f.error);
    if (auto it = by_gpu.find(g.index); yes && it != by_gpu.end()) {
      const auto& r = *it->second;
      if (!r.values.empty()) {
        ++with_values;
        nlohmann::json m = nlohmann::json::object();
        for (const auto& [k, value] : r.values)
          if (const auto* spec = spec_named(k))
            m[k + unit_suffix(spec->unit)] = gpm_metric_value(*spec, value);
        row.data["metrics"] = m;
        row.data["window_seconds"] = static_cast<double>(r.window.count()) / 1000.0;
        auto cell = [&](const char* k) {
          auto value = r.values.find(k);
          return value == r.values.end() ? std::string("-") : fmt::format("{:.1f}", value->second);
        };
        row.cells[2] = cell("sm_occupancy");
        row.cells[3] = cell("any_tensor_util");
        row.cells[4] = cell("fp32_util");
        row.cells[5] = cell("fp16_util");
      } else {
        row.data["sampling"] = r.status;
      }
      if (r.error)
        sampling_errors += (sampling_errors.empty() ? "" : "; ") + gpu_label(g) + ": " + r.status;
    }
  }
  bool sampled_ok = sampled != nullptr && sampled->ok();
  v.data = {{"metrics_sampled", with_values > 0}};
  if (sampled != nullptr && !sampled->ok() && supported > 0) {
    v.data["sampling_error"] = sampled->error().message;
    sampling_errors = sampled->error().message;
  }
  if (supported == 0) {
    v.healthy_reason = "GPM not supported (not applicable)";
    return v;
  }
  v.healthy_reason = "GPM supported on " + std::to_string(supported) + "/" +
                     std::to_string(snapshot.gpus.size()) + " GPU(s)";
  if (with_values > 0)
    v.healthy_reason += ", metrics sampled on " + std::to_string(with_values);
  else if (sampled_ok && sampling_errors.empty())
    v.healthy_reason += ", first sample taken (metrics from the next check on)";
  if (!sampling_errors.empty()) v.healthy_reason += "; GPM sampling failed: " + sampling_errors;
  return v;
}

GpmComponent::GpmComponent(const ComponentContext& ctx) : NvidiaComponent(ctx) {
  if (ctx.metrics == nullptr) return;
  for (const auto& spec : nvml::kGpmMetrics)
    ctx.metrics->describe(
        gpm_metric_name(spec),
        std::string("GPM ") + spec.name +
            (spec.unit == nvml::GpmUnit::kPercent ? " in percent" : " in bytes per second") +
            ", averaged between two checks");
}

CheckResult GpmComponent::evaluate(const nvml::NvmlSnapshot& snapshot) {
  std::vector<unsigned int> capable = gpm_capable_gpus(snapshot);
  if (capable.empty()) return render_verdict(name(), evaluate_gpm(snapshot));
  auto sampled = source().gpm_sample(capable);
  if (MetricRegistry* m = ctx().metrics; m != nullptr) {
    // Each family replaced as a whole: a GPU not sampled this time (lost, or a failed sample) has
    // no series rather than its last value. The snapshot may leave GPUs out (those that do not
    // answer), so a GPU is found by its index, not its position.
    std::map<std::string, std::vector<std::pair<Labels, double>>> series;
    if (sampled.ok())
      for (const auto& r : *sampled) {
        auto g = std::find_if(snapshot.gpus.begin(), snapshot.gpus.end(),
                              [&](const auto& x) { return x.index == r.index; });
        if (g == snapshot.gpus.end()) continue;
        for (const auto& [k, v] : r.values)
          if (const auto* spec = spec_named(k))
            series[gpm_metric_name(*spec)].emplace_back(gpu_labels(*g), gpm_metric_value(*spec, v));
      }
    for (const auto& spec : nvml::kGpmMetrics) {
      const std::string metric = gpm_metric_name(spec);
      m->replace_series(kGpmName, metric, series[metric]);
    }
  }
  return render_verdict(name(), evaluate_gpm(snapshot, &sampled));
}

}  // namespace gpud::components
