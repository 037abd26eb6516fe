// NvidiaComponent: the skeleton every NVML-based component shares. It takes the shared snapshot
// and hands the GPUs that answered to the component's evaluate(). A fault of NVML itself (missing
// while NVIDIA GPUs are expected, failing to initialise, a hung call) and a GPU that is lost or
// needs a reset are one finding, reported by the component that owns them
// (accelerator-nvidia-info, kNvmlFaultOwner); the others judge what they can read and list what
// they could not check ("not checked: GPU 3 (0000:3a:00.0) lost, see accelerator-nvidia-info").
#pragma once

#include <atomic>
#include <optional>
#include <span>

#include "catalog/nvidia_products.h"
#include "components/component.h"
#include "nvml/source.h"

namespace gpud::components {

// A per-GPU metric as data. The component lists its metrics in a static table; the base describes
// them once and, at every check, publishes read(gpu) for each GPU with gpu_labels(gpu). A GPU whose
// value could not be read (nullopt) has no series, never its last good value, and a check that got
// no snapshot leaves none at all.
struct GpuMetric {
  std::string_view name;
  std::string_view help;
  MetricKind kind;
  std::optional<double> (*read)(const nvml::GpuSnapshot& gpu);
};

// A field as a metric value: its value when ok, nullopt otherwise.
template <typename T>
std::optional<double> metric_value(const nvml::Field<T>& f) {
  return f.ok() ? std::optional<double>(static_cast<double>(f.value)) : std::nullopt;
}
// GpuMetric::read for one member of a GPU's struct field (kField, e.g. &GpuSnapshot::ecc_total),
// or for the field itself (kMember nullptr); a bool reads as 1 or 0.
template <auto kField, auto kMember = nullptr>
std::optional<double> read_metric(const nvml::GpuSnapshot& gpu) {
  const auto& f = gpu.*kField;
  if (!f.ok()) return std::nullopt;
  if constexpr (std::is_null_pointer_v<decltype(kMember)>)
    return static_cast<double>(f.value);
  else
    return static_cast<double>(f.value.*kMember);
}

// The component that reports NVML's own faults and every GPU NVML cannot read.
inline constexpr std::string_view kNvmlFaultOwner = "accelerator-nvidia-info";
// 1 when NVML answered the last collection (nvml::NvidiaSource::answered_last_collection), 0 when
// NVML is missing, failed or did not answer (published by the owner at each of its checks; the
// `gpud` component publishes the same value as gpud_nvml_up).
inline constexpr const char* kNvmlUpMetric = "accelerator_nvidia_nvml_up";

class NvidiaComponent : public Component {
 public:
  explicit NvidiaComponent(const ComponentContext& ctx, std::span<const GpuMetric> metrics = {});
  std::vector<std::string> tags() const override;
  bool supported() const override;
  std::chrono::seconds interval() const override { return config().nvidia_check_interval; }
  CheckResult check() final;

 protected:
  // The component's rule over a snapshot in which no GPU is lost or needs a reset (unless
  // sees_every_gpu()).
  virtual CheckResult evaluate(const nvml::NvmlSnapshot& snapshot) = 0;
  // True for the fault owner: it is shown when NVIDIA GPUs are expected even without NVML, and
  // turns NVML's faults into its own Unhealthy state.
  virtual bool owns_nvml_faults() const { return false; }
  // True when evaluate() wants the GPUs that did not answer too (the owner, the GPU count).
  virtual bool sees_every_gpu() const { return owns_nvml_faults(); }
  // A component that also learns from the kernel log judges its events here when NVML gave no
  // snapshot (`gpud scan --kernel-log` on a machine without NVIDIA's driver), into the result
  // check() returns. Default: nothing.
  virtual void judge_without_snapshot(CheckResult& /*r*/) {}
  // NVIDIA GPUs are expected here: on the PCI bus, or --gpu-count > 0.
  bool gpus_expected() const;
  nvml::NvidiaSource& source() const { return *ctx().nvidia; }
  // Whether the GPU metrics are published for this snapshot (e.g. not on a product without the
  // feature); without them the component has no series.
  virtual bool publishes_metrics(const nvml::NvmlSnapshot&) const { return true; }

  // For components that apply to some products only: supported until a snapshot shows that
  // `applies(snapshot)` is false. `gpud scan` asks before its one check, so the snapshot is probed
  // then; the daemon learns it from its first check (learn_support), so an API request never
  // waits on NVML.
  template <typename Applies>
  bool supported_when(Applies applies) const {
    if (!NvidiaComponent::supported()) return false;
    int s = support_.load();
    if (s == kUnknown && ctx().scan_mode && source().status() == nvml::NvmlStatus::kReady) {
      if (auto snap = source().snapshot(); snap.ok()) {
        s = applies(**snap) ? kYes : kNo;
        support_.store(s);
      }
    }
    return s != kNo;
  }
  void learn_support(bool applies) const { support_.store(applies ? kYes : kNo); }

 private:
  enum Support : int { kUnknown, kYes, kNo };
  std::span<const GpuMetric> metrics_;
  mutable std::atomic<int> support_{kUnknown};
};

// What a check knows before any rule: NVML's state, the snapshot (or why there is none) and
// whether NVIDIA GPUs are expected (and from what: "--gpu-count 8", bus ids on the PCI bus).
struct NvidiaPreambleInput {
  bool owner = false;  // the component is the fault owner
  nvml::NvmlStatus status = nvml::NvmlStatus::kNotFound;
  std::string status_message;
  nvml::nvmlReturn_t init_return = nvml::NVML_SUCCESS;
  bool expected = false;
  std::string expected_because;
  // The call that hung NVML's last collection (NvidiaSource::hang), when it did.
  std::optional<nvml::HangReport> hang;
};

// The preamble as a pure function (tests call it): NVML missing, errored or hung (a call past its
// deadline) gives the owner an Unhealthy state with the error and REBOOT_SYSTEM and every other
// component a Healthy "not checked" state that points at the owner; NVML not answering yet (a
// collection past the answer wait, nvml::is_not_answering) gives every component an Initializing
// "not checked: NVML is not answering…" state; nullopt when the snapshot can be evaluated. A hang
// on one GPU's read is marked on that GPU in the owner's data: {"gpus": [{"index", "uuid",
// "bus_id", "state": "hung", "call"}]}, its row in /v1/gpus (the fault stays every GPU's: the
// driver does not answer for any of them).
std::optional<CheckResult> nvidia_preamble(
    std::string_view component, const NvidiaPreambleInput& in,
    const Result<std::shared_ptr<const nvml::NvmlSnapshot>>& snap);

// The GPUs of `snapshot` that cannot be judged (lost, reset required), as findings blocked by the
// owner, each reason as the owner's names it: "GPU 3 (0000:3a:00.0) lost".
std::vector<Finding> unreachable_gpus(const nvml::NvmlSnapshot& snapshot);
// `snapshot` without those GPUs (nor the NVLink pairs they are in).
nvml::NvmlSnapshot checkable_part(const nvml::NvmlSnapshot& snapshot);
// Marks `result` as not having checked the `blocked` GPUs (unreachable_gpus): the reason ends with
// "(not checked: GPU 3 (0000:3a:00.0) lost, see accelerator-nvidia-info)" and each state carries
// the findings (extra_info "not_checked" on the wire).
void mark_not_checked(CheckResult& result, const std::vector<Finding>& blocked);

// The product of a snapshot: the name of its first GPU whose name could be read ("" when none).
std::string product_of(const nvml::NvmlSnapshot& snapshot);
// What that product can do (row remapping, fabric manager, fabric state...): the one catalog.
catalog::ProductCaps caps_of(const nvml::NvmlSnapshot& snapshot);

// Publishes `metrics` of `component` for each GPU of `snapshot` (none when null): each replaces
// the component's series of its name, so a value that could not be read is not served.
void publish_gpu_metrics(MetricRegistry& registry, std::string_view component,
                         std::span<const GpuMetric> metrics, const nvml::NvmlSnapshot* snapshot);

// A GPU's short label for reasons: "GPU 0 (0000:3b:00.0)".
std::string gpu_label(const nvml::GpuSnapshot& gpu);
// Labels every NVIDIA metric carries: uuid, gpu (index), pci_bus_id.
Labels gpu_labels(const nvml::GpuSnapshot& gpu);

}  // namespace gpud::components
