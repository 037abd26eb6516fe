// NvidiaVerdict: what an NVIDIA component's rule decides, as values (the health and repair action
// of each finding, which GPU it is about, each GPU's data), and render_verdict(), the one place
// that turns a verdict into a CheckResult: the reason, the suggested action, extra_info.data and
// the table `gpud scan` prints.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/health.h"
#include "nvml/device.h"

namespace gpud::components {

// One thing a rule found. A Healthy finding is a note: a part of the reason that changes no
// health.
// render_verdict turns each into the state's typed Finding (core/health.h).
struct VerdictFinding {
  std::optional<unsigned int> gpu;  // the GPU's index; nullopt when not about one GPU
  Health health = Health::kHealthy;
  std::string reason;  // its part of the state's reason
  std::optional<RepairAction> action;
  bool nvml_error = false;  // an NVML error: the reason is also part of the state's error
  // The GPU's UUID and bus id ("" when not known here: render_verdict takes them from the GPU's
  // row).
  std::string uuid;
  std::string bus_id;

  // A finding about `gpu`, with its identity.
  static VerdictFinding about(const nvml::GpuSnapshot& gpu, Health health, std::string reason,
                              std::optional<RepairAction> action = std::nullopt,
                              bool nvml_error = false);
};

// uuid, bus_id and index of a GPU, the start of most per-GPU JSON objects.
nlohmann::json gpu_identity_json(const nvml::GpuSnapshot& gpu);
// A field as JSON: its value when ok, null otherwise.
template <typename T>
nlohmann::json field_json(const nvml::Field<T>& f) {
  return f.ok() ? nlohmann::json(f.value) : nlohmann::json(nullptr);
}
// What the detail table shows for a field that was not read: "n/a" when not supported, "error"
// when errored.
template <typename T>
std::string unread_text(const nvml::Field<T>& f) {
  return f.supported() ? "error" : "n/a";
}
// A field for the detail table: its value, or unread_text.
template <typename T>
std::string field_text(const nvml::Field<T>& f) {
  if (f.ok()) {
    if constexpr (std::is_same_v<T, std::string>)
      return f.value;
    else
      return std::to_string(f.value);
  }
  return unread_text(f);
}
// Renders rows as an aligned table (first row: header), for CheckResult::detail.
std::string format_table(const std::vector<std::vector<std::string>>& rows);

// One GPU's part of the verdict: its object in extra_info.data's "gpus" and its row of the table
// (after the GPU index, which the renderer puts first).
struct GpuRow {
  explicit GpuRow(const nvml::GpuSnapshot& gpu) : index(gpu.index), data(gpu_identity_json(gpu)) {}
  GpuRow(unsigned int gpu_index, nlohmann::json identity)
      : index(gpu_index), data(std::move(identity)) {}

  // A field shown both ways: its value (null unless ok) under `key`, its text in the next cell.
  template <typename T>
  GpuRow& field(std::string_view key, const nvml::Field<T>& f) {
    data[std::string(key)] = field_json(f);
    cells.push_back(field_text(f));
    return *this;
  }

  unsigned int index;
  nlohmann::json data;
  std::vector<std::string> cells;
  bool in_data = true;   // false: the row is in the table only
  bool in_table = true;  // false: the row is in extra_info's "gpus" only
};

struct NvidiaVerdict {
  std::vector<VerdictFinding> findings;
  std::string healthy_reason;      // the reason when nothing was found
  std::string reason_prefix;       // before the findings' reasons, when there are findings
  std::string reason_suffix;       // after them
  std::string action_description;  // the suggested action's description
  // extra_info.data; with a table, render_verdict adds "gpus": each row's data.
  nlohmann::json data = nlohmann::json::object();
  std::vector<std::string> columns;  // the table's columns after "GPU"; none: no per-GPU table
  std::vector<GpuRow> gpus;
  std::string detail_preface;     // the detail's text before the table
  std::string detail_postscript;  // and after it
  std::string empty_table;        // instead of a table without rows ("": its header alone)

  // A finding about one GPU; its reason is written by the caller (it usually names the GPU).
  void add(const nvml::GpuSnapshot& gpu, Health health, std::string reason,
           std::optional<RepairAction> action = std::nullopt);
  // A finding about no single GPU.
  void add(Health health, std::string reason, std::optional<RepairAction> action = std::nullopt);
  // A per-GPU NVML error other than lost / reset (the preamble handles those): Unhealthy, reason
  // "<GPU label>: <what>: <error>".
  void nvml_error(const nvml::GpuSnapshot& gpu, std::string_view what, const std::string& error);
  // True when the field can be used; an errored field is recorded as an NVML error, a
  // NOT_SUPPORTED one is "not applicable" (false, no finding).
  template <typename T>
  bool usable(const nvml::GpuSnapshot& gpu, const nvml::Field<T>& field, std::string_view what) {
    if (field.status == nvml::FieldStatus::kError) nvml_error(gpu, what, field.error);
    return field.ok();
  }

  // The worst finding's health; Healthy when there is none.
  Health health() const;
  // The strongest action asked for: HARDWARE_INSPECTION, then REBOOT_SYSTEM, then
  // CHECK_USER_APP_AND_GPU.
  std::optional<RepairAction> action() const;
  // The findings about one GPU.
  std::vector<VerdictFinding> findings_for(unsigned int gpu) const;
};

// The one state of `component`: the findings' reasons joined with "; " between the prefix and
// the suffix (or the healthy reason),
// the strongest action with the verdict's description, the NVML errors as its error,
// extra_info {"data": data} and the table as the detail.
CheckResult render_verdict(std::string_view component, const NvidiaVerdict& verdict,
                           TimePoint now = Clock::now());

}  // namespace gpud::components
