#include "components/nvidia/nvidia_component.h"

#include <set>

#include "core/strings.h"
#include "host/host_fs.h"
#include "host/pci.h"

namespace gpud::components {

NvidiaComponent::NvidiaComponent(const ComponentContext& ctx, std::span<const GpuMetric> metrics)
    : Component(ctx), metrics_(metrics) {
  if (ctx.metrics == nullptr) return;
  for (const auto& m : metrics_) ctx.metrics->describe(m.name, m.help, m.kind);
}

std::vector<std::string> NvidiaComponent::tags() const {
  return {"accelerator", "gpu", "nvidia", std::string(name())};
}

bool NvidiaComponent::gpus_expected() const {
  return ctx().nvidia_pci_present || config().gpu_count > 0;
}

bool NvidiaComponent::supported() const {
  if (ctx().nvidia == nullptr) return false;
  if (ctx().nvidia->opening()) return true;
  if (ctx().nvidia->status() != nvml::NvmlStatus::kNotFound) return true;
  return owns_nvml_faults() && gpus_expected();
}

namespace {

// Why NVIDIA GPUs are expected: "--gpu-count 8" and / or the NVIDIA GPUs sysfs lists.
std::string expected_because(const Config& config) {
  std::vector<std::string> why;
  if (config.gpu_count > 0) why.push_back("--gpu-count " + std::to_string(config.gpu_count));
  auto bus = host::find_nvidia_gpus(host::HostFs(config.host_root));
  if (!bus.empty())
    why.push_back(std::to_string(bus.size()) + " NVIDIA GPU(s) on the PCI bus: " + join(bus, ", "));
  return join(why, "; ");
}

}  // namespace

CheckResult NvidiaComponent::check() {
  // No source (a context without NVIDIA's components, as in unit tests) reads as NVML not found.
  const bool has_source = ctx().nvidia != nullptr;
  if (has_source && source().opening())
    return single_state(name(), Health::kInitializing, "NVML initialization in progress");
  NvidiaPreambleInput in;
  in.owner = owns_nvml_faults();
  if (has_source) {
    in.status = source().status();
    in.status_message = source().message();
    in.init_return = source().init_return();
  } else {
    in.status_message = "NVML not loaded";
  }
  if (in.owner && in.status != nvml::NvmlStatus::kReady) {
    in.expected = gpus_expected();
    if (in.expected) in.expected_because = expected_because(config());
  }
  auto snap =
      in.status == nvml::NvmlStatus::kReady
          ? source().snapshot()
          : Result<std::shared_ptr<const nvml::NvmlSnapshot>>(make_error(in.status_message));
  if (ctx().metrics != nullptr && !metrics_.empty()) {
    const nvml::NvmlSnapshot* published = snap && publishes_metrics(**snap) ? snap->get() : nullptr;
    publish_gpu_metrics(*ctx().metrics, name(), metrics_, published);
  }
  if (has_source && !snap && nvml::is_timeout(snap.error())) in.hang = source().hang();
  auto early = nvidia_preamble(name(), in, snap);
  // Nothing read, nothing served: every series the component set from an earlier snapshot goes
  // (those of its evaluate() too), never its last value.
  if (early && ctx().metrics != nullptr) ctx().metrics->clear_component(name());
  if (in.owner && ctx().metrics != nullptr)
    ctx().metrics->set(name(), kNvmlUpMetric,
                       has_source && source().answered_last_collection() ? 1 : 0);
  if (early) {
    judge_without_snapshot(*early);
    return *early;
  }
  const nvml::NvmlSnapshot& full = **snap;
  auto unreachable = unreachable_gpus(full);
  if (unreachable.empty() || sees_every_gpu()) return evaluate(full);
  CheckResult r = evaluate(checkable_part(full));
  mark_not_checked(r, unreachable);
  return r;
}

void publish_gpu_metrics(MetricRegistry& registry, std::string_view component,
                         std::span<const GpuMetric> metrics, const nvml::NvmlSnapshot* snapshot) {
  for (const auto& m : metrics) {
    std::vector<std::pair<Labels, double>> series;
    if (snapshot != nullptr)
      for (const auto& g : snapshot->gpus)
        if (g.checkable())
          if (auto v = m.read(g)) series.emplace_back(gpu_labels(g), *v);
    registry.replace_series(component, m.name, series);
  }
}

std::optional<CheckResult> nvidia_preamble(
    std::string_view component, const NvidiaPreambleInput& in,
    const Result<std::shared_ptr<const nvml::NvmlSnapshot>>& snap) {
  if (in.status == nvml::NvmlStatus::kNotFound && !(in.owner && in.expected))
    return single_state(component, Health::kHealthy, "no NVIDIA GPU / NVML not found");
  if (in.status == nvml::NvmlStatus::kReady && snap) return std::nullopt;
  const std::string error = snap ? in.status_message : snap.error().message;
  // A collection past the answer wait but not yet past its deadline: slow or hung, not known yet.
  // Every component, the owner too, says what it could not check, and none gives a verdict.
  if (!snap && nvml::is_not_answering(snap.error())) {
    CheckResult r = single_state(component, Health::kInitializing, "not checked: " + error);
    r.states[0].findings.push_back(Finding::blocked(Subject::every_gpu(), Health::kInitializing,
                                                    "all GPUs: " + error,
                                                    std::string(kNvmlFaultOwner)));
    r.states[0].error = error;
    return r;
  }
  if (!in.owner) {
    CheckResult r =
        single_state(component, Health::kHealthy,
                     "not checked: " + error + " (see " + std::string(kNvmlFaultOwner) + ")");
    r.states[0].findings.push_back(Finding::blocked(Subject::every_gpu(), Health::kHealthy,
                                                    "all GPUs: " + error,
                                                    std::string(kNvmlFaultOwner)));
    r.states[0].error = error;  // nothing was read: not a successful check
    return r;
  }
  std::string reason = error;
  std::string what;
  if (in.status == nvml::NvmlStatus::kNotFound) {
    reason = "NVIDIA GPUs expected (" + in.expected_because + ") but NVML is not usable: " + error;
    what =
        "load the NVIDIA driver for the running kernel (modprobe nvidia; reinstall it when the "
        "module is missing) or reboot";
  } else if (in.init_return == nvml::NVML_ERROR_NO_PERMISSION) {
    what = "run gpud as root or give it access to /dev/nvidia*";
  } else if (in.init_return == nvml::NVML_ERROR_LIB_RM_VERSION_MISMATCH) {
    what =
        "the NVML library and the loaded kernel module differ (driver upgraded without a "
        "reboot): reboot the system";
  } else if (!snap && nvml::is_timeout(snap.error())) {
    what = "the NVIDIA driver does not answer: reboot the system";
  } else {
    what = "reboot the system to reinitialise the NVIDIA driver";
  }
  if (in.expected && in.status != nvml::NvmlStatus::kNotFound)
    reason += " (NVIDIA GPUs expected: " + in.expected_because + ")";
  nlohmann::json data = nullptr;
  if (!snap && nvml::is_timeout(snap.error()) && in.hang && in.hang->gpu_index)
    data = {{"gpus", nlohmann::json::array({{{"index", *in.hang->gpu_index},
                                             {"uuid", in.hang->gpu_uuid},
                                             {"bus_id", in.hang->gpu_bus_id},
                                             {"state", "hung"},
                                             {"call", in.hang->call}}})}};
  auto r = single_state(component, Health::kUnhealthy, reason,
                        SuggestedActions{what, {RepairAction::kRebootSystem}}, std::move(data));
  r.states[0].error = error;
  // NVML's own fault is every GPU's.
  r.states[0].findings.push_back(Finding::about(Subject::every_gpu(), Health::kUnhealthy, reason,
                                                RepairAction::kRebootSystem));
  return r;
}

std::vector<Finding> unreachable_gpus(const nvml::NvmlSnapshot& snapshot) {
  std::vector<Finding> out;
  for (const auto& g : snapshot.gpus)
    if (!g.checkable())
      out.push_back(Finding::blocked(Subject::gpu(g.index, g.uuid.ok() ? g.uuid.value : "",
                                                  g.pci_bus_id.ok() ? g.pci_bus_id.value : ""),
                                     Health::kHealthy,
                                     gpu_label(g) + (g.lost ? " lost" : " requires reset"),
                                     std::string(kNvmlFaultOwner)));
  return out;
}

nvml::NvmlSnapshot checkable_part(const nvml::NvmlSnapshot& snapshot) {
  nvml::NvmlSnapshot out;
  out.driver = snapshot.driver;
  out.time = snapshot.time;
  std::set<unsigned int> kept;
  for (const auto& g : snapshot.gpus) {
    if (!g.checkable()) continue;
    out.gpus.push_back(g);
    kept.insert(g.index);
  }
  for (const auto& p : snapshot.nvlink_p2p)
    if (kept.count(p.a) != 0 && kept.count(p.b) != 0) out.nvlink_p2p.push_back(p);
  return out;
}

void mark_not_checked(CheckResult& result, const std::vector<Finding>& blocked) {
  if (blocked.empty()) return;
  std::vector<std::string> what;
  for (const auto& b : blocked) what.push_back(b.reason);
  const std::string see = ", see " + std::string(kNvmlFaultOwner);
  for (auto& st : result.states) {
    st.reason += " (not checked: " + join(what, "; ") + see + ")";
    st.findings.insert(st.findings.end(), blocked.begin(), blocked.end());
  }
}

std::string product_of(const nvml::NvmlSnapshot& snapshot) {
  for (const auto& g : snapshot.gpus)
    if (g.name.ok()) return g.name.value;
  return "";
}

catalog::ProductCaps caps_of(const nvml::NvmlSnapshot& snapshot) {
  return catalog::product_caps(product_of(snapshot));
}

std::string gpu_label(const nvml::GpuSnapshot& gpu) {
  std::string s = "GPU " + std::to_string(gpu.index);
  if (gpu.pci_bus_id.ok()) s += " (" + gpu.pci_bus_id.value + ")";
  return s;
}

Labels gpu_labels(const nvml::GpuSnapshot& gpu) {
  return {{"uuid", gpu.uuid.ok() ? gpu.uuid.value : ""},
          {"gpu", std::to_string(gpu.index)},
          {"pci_bus_id", gpu.pci_bus_id.ok() ? gpu.pci_bus_id.value : ""}};
}

}  // namespace gpud::components
