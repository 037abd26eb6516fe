#include "components/nvidia/remapped_rows.h"

#include <fmt/format.h>

namespace gpud::components {

namespace {

constexpr GpuMetric kMetrics[] = {
    // GPUd feeds the first one with the correctable count; we use the uncorrectable one.
    {"accelerator_nvidia_remapped_rows_due_to_uncorrectable_errors",
     "Rows remapped for uncorrectable errors", MetricKind::kGauge,
     read_metric<&nvml::GpuSnapshot::remapped_rows, &nvml::RemappedRows::uncorrected>},
    {"accelerator_nvidia_remapped_rows_due_to_correctable_errors",
     "Rows remapped for correctable errors", MetricKind::kGauge,
     read_metric<&nvml::GpuSnapshot::remapped_rows, &nvml::RemappedRows::corrected>},
    {"accelerator_nvidia_remapped_rows_remapping_pending",
     "1 when a row remapping waits for a GPU reset", MetricKind::kGauge,
     read_metric<&nvml::GpuSnapshot::remapped_rows, &nvml::RemappedRows::pending>},
    {"accelerator_nvidia_remapped_rows_remapping_failed", "1 when a row remapping failed",
     MetricKind::kGauge,
     read_metric<&nvml::GpuSnapshot::remapped_rows, &nvml::RemappedRows::failure>},
};

}  // namespace

NvidiaVerdict evaluate_remapped_rows(const nvml::NvmlSnapshot& snapshot) {
  NvidiaVerdict v;
  std::string product = product_of(snapshot);
  if (!caps_of(snapshot).row_remapping) {
    v.healthy_reason =
        (product.empty() ? std::string("GPU") : product) + " does not support row remapping";
    v.data = {{"product", product}, {"supported", false}};
    v.detail_preface = "row remapping: not supported by " + product + "\n";
    return v;
  }
  v.healthy_reason = "all " + std::to_string(snapshot.gpus.size()) +
                     " GPU(s) were checked, no row remapping issue found";
  v.data = {{"product", product}};
  v.columns = {"CORRECTABLE", "UNCORRECTABLE", "PENDING", "FAILED"};
  for (const auto& g : snapshot.gpus) {
    GpuRow& row = v.gpus.emplace_back(g);
    row.data["supported"] = g.remapped_rows.supported();
    if (v.usable(g, g.remapped_rows, "remapped rows")) {
      const nvml::RemappedRows& rr = g.remapped_rows.value;
      row.data["remapped_due_to_correctable_errors"] = rr.corrected;
      row.data["remapped_due_to_uncorrectable_errors"] = rr.uncorrected;
      row.data["remapping_pending"] = rr.pending;
      row.data["remapping_failed"] = rr.failure;
      row.cells = {std::to_string(rr.corrected), std::to_string(rr.uncorrected),
                   rr.pending ? "yes" : "no", rr.failure ? "yes" : "no"};
      if (rr.failure)
        v.add(g, Health::kUnhealthy,
              fmt::format("{} qualifies for RMA (row remapping failed, {} uncorrectable "
                          "rows remapped)",
                          gpu_label(g), rr.uncorrected),
              RepairAction::kHardwareInspection);
      if (rr.pending)
        v.add(g, Health::kUnhealthy, gpu_label(g) + " needs reset (detected pending row remapping)",
              RepairAction::kRebootSystem);
    } else {
      row.cells.assign(v.columns.size(), unread_text(g.remapped_rows));
    }
  }
  v.action_description = v.action() == RepairAction::kHardwareInspection
                             ? "row remapping failed: the GPU qualifies for RMA"
                             : "row remapping pending requires GPU reset or system reboot";
  return v;
}

RemappedRowsComponent::RemappedRowsComponent(const ComponentContext& ctx)
    : NvidiaComponent(ctx, kMetrics) {}

bool RemappedRowsComponent::supported() const {
  return supported_when([](const nvml::NvmlSnapshot& snap) { return caps_of(snap).row_remapping; });
}

bool RemappedRowsComponent::publishes_metrics(const nvml::NvmlSnapshot& snapshot) const {
  return caps_of(snapshot).row_remapping;
}

CheckResult RemappedRowsComponent::evaluate(const nvml::NvmlSnapshot& snapshot) {
  learn_support(caps_of(snapshot).row_remapping);
  return render_verdict(name(), evaluate_remapped_rows(snapshot));
}

}  // namespace gpud::components
