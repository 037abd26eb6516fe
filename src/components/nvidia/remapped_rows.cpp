#include "components/nvidia/remapped_rows.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

#include "components/nvidia/gpu_issues.h"

namespace gpud::components {

namespace {
constexpr const char* kName = "accelerator-nvidia-remapped-rows";
constexpr const char* kUncorrectable =
    "accelerator_nvidia_remapped_rows_due_to_uncorrectable_errors";
constexpr const char* kCorrectable = "accelerator_nvidia_remapped_rows_due_to_correctable_errors";
constexpr const char* kPending = "accelerator_nvidia_remapped_rows_remapping_pending";
constexpr const char* kFailed = "accelerator_nvidia_remapped_rows_remapping_failed";
}  // namespace

CheckResult evaluate_remapped_rows(const nvml::NvmlSnapshot& snapshot) {
  std::string product = product_of(snapshot);
  if (!caps_of(snapshot).row_remapping) {
    auto r = single_state(
        kName, Health::kHealthy,
        (product.empty() ? std::string("GPU") : product) + " does not support row remapping",
        std::nullopt,
        {{"data", nlohmann::json({{"product", product}, {"supported", false}}).dump()}});
    r.detail = "row remapping: not supported by " + product + "\n";
    return r;
  }
  GpuIssues issues;
  nlohmann::json gpus = nlohmann::json::array();
  std::vector<std::vector<std::string>> rows = {
      {"GPU", "CORRECTABLE", "UNCORRECTABLE", "PENDING", "FAILED"}};
  for (const auto& g : snapshot.gpus) {
    nlohmann::json j = gpu_identity_json(g);
    j["supported"] = g.remapped_rows.supported();
    if (issues.usable(g, g.remapped_rows, "remapped rows")) {
      const nvml::RemappedRows& rr = g.remapped_rows.value;
      j["remapped_due_to_correctable_errors"] = rr.corrected;
      j["remapped_due_to_uncorrectable_errors"] = rr.uncorrected;
      j["remapping_pending"] = rr.pending;
      j["remapping_failed"] = rr.failure;
      rows.push_back({std::to_string(g.index), std::to_string(rr.corrected),
                      std::to_string(rr.uncorrected), rr.pending ? "yes" : "no",
                      rr.failure ? "yes" : "no"});
      if (rr.failure)
        issues.add(Health::kUnhealthy,
                   fmt::format("{} qualifies for RMA (row remapping failed, {} uncorrectable "
                               "rows remapped)",
                               gpu_label(g), rr.uncorrected),
                   RepairAction::kHardwareInspection);
      if (rr.pending)
        issues.add(Health::kUnhealthy,
                   gpu_label(g) + " needs reset (detected pending row remapping)",
                   RepairAction::kRebootSystem);
    } else {
      std::string t = g.remapped_rows.supported() ? "error" : "n/a";
      rows.push_back({std::to_string(g.index), t, t, t, t});
    }
    gpus.push_back(std::move(j));
  }
  auto r = issues.result(kName,
                         "all " + std::to_string(snapshot.gpus.size()) +
                             " GPU(s) were checked, no row remapping issue found",
                         {{"product", product}, {"gpus", gpus}}, format_table(rows));
  if (auto& a = r.states[0].suggested_actions) {
    a->description = a->repair_actions.front() == RepairAction::kHardwareInspection
                         ? "row remapping failed: the GPU qualifies for RMA"
                         : "row remapping pending requires GPU reset or system reboot";
  }
  return r;
}

RemappedRowsComponent::RemappedRowsComponent(const ComponentContext& ctx) : NvidiaComponent(ctx) {
  if (ctx.metrics == nullptr) return;
  MetricRegistry& m = *ctx.metrics;
  m.describe(kUncorrectable, "Rows remapped for uncorrectable errors");
  m.describe(kCorrectable, "Rows remapped for correctable errors");
  m.describe(kPending, "1 when a row remapping waits for a GPU reset");
  m.describe(kFailed, "1 when a row remapping failed");
}

bool RemappedRowsComponent::supported() const {
  return supported_when([](const nvml::NvmlSnapshot& snap) { return caps_of(snap).row_remapping; });
}

CheckResult RemappedRowsComponent::evaluate(const nvml::NvmlSnapshot& snapshot) {
  bool supports = caps_of(snapshot).row_remapping;
  learn_support(supports);
  if (MetricRegistry* m = ctx().metrics; m != nullptr && supports) {
    for (const auto& g : snapshot.gpus) {
      if (!g.remapped_rows.ok()) continue;
      Labels l = gpu_labels(g);
      const nvml::RemappedRows& rr = g.remapped_rows.value;
      // GPUd feeds the first one with the correctable count; we use the uncorrectable one.
      m->set(kName, kUncorrectable, rr.uncorrected, l);
      m->set(kName, kCorrectable, rr.corrected, l);
      m->set(kName, kPending, rr.pending ? 1 : 0, l);
      m->set(kName, kFailed, rr.failure ? 1 : 0, l);
    }
  }
  return evaluate_remapped_rows(snapshot);
}

}  // namespace gpud::components
