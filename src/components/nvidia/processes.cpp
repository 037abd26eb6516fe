#include "components/nvidia/processes.h"

#include <algorithm>
#include <set>

#include "components/nvidia/bad_envs.h"
#include "host/command_line_redaction.h"

namespace gpud::components {
namespace {

std::vector<std::string> split_nul(std::string_view block) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start < block.size()) {
    size_t end = block.find('\0', start);
    if (end == std::string_view::npos) end = block.size();
    if (end > start) out.emplace_back(block.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

constexpr GpuMetric kMetrics[] = {
    // GPUd's gauge: compute processes only (a graphics-only process, such as Xorg, is not counted).
    {"accelerator_nvidia_processes_running_total", "Compute processes running on the GPU",
     MetricKind::kGauge,
     [](const nvml::GpuSnapshot& g) -> std::optional<double> {
       if (!g.processes.ok()) return std::nullopt;
       return static_cast<double>(std::count_if(g.processes.value.begin(), g.processes.value.end(),
                                                [](const nvml::Process& p) { return p.compute; }));
     }},
};

}  // namespace

std::string_view process_type(const nvml::Process& p) {
  if (p.compute && p.graphics) return "C+G";
  return p.graphics ? "G" : "C";
}

std::vector<std::string> bad_env_vars_in_environ(std::string_view environ_block) {
  std::vector<std::string> out;
  for (const auto& kv : split_nul(environ_block)) {
    auto key = std::string_view(kv).substr(0, kv.find('='));
    if (is_bad_cuda_env_var(key)) out.emplace_back(key);
  }
  return out;
}

std::optional<ProcInfo> read_proc_info(const host::HostFs& fs, uint32_t pid, bool with_cmdline) {
  std::string dir = "/proc/" + std::to_string(pid);
  if (!fs.exists(dir)) return std::nullopt;
  ProcInfo info;
  if (auto n = fs.read_line(dir + "/comm")) info.name = *n;
  if (with_cmdline) {
    auto c = fs.read(dir + "/cmdline", 64 << 10);
    info.cmdline = host::redact_command_line(c ? split_nul(*c) : std::vector<std::string>{});
  }
  if (auto e = fs.read(dir + "/environ", 1 << 20)) info.bad_env_vars = bad_env_vars_in_environ(*e);
  return info;
}

std::string container_cell(const std::optional<runtimes::Attribution>& a) {
  if (!a) return "-";
  if (!a->pod.empty())
    return a->pod_namespace + "/" + a->pod + (a->container.empty() ? "" : "/" + a->container);
  if (!a->container.empty()) return a->container;
  if (!a->container_id.empty()) return a->container_id.substr(0, 12);
  return "pod " + a->pod_uid;
}

bool processes_have_error(const nvml::NvmlSnapshot& snapshot) {
  for (const auto& g : snapshot.gpus)
    if (g.processes.status == nvml::FieldStatus::kError) return true;
  return false;
}

NvidiaVerdict evaluate_processes(const nvml::NvmlSnapshot& snapshot,
                                 const std::map<uint32_t, std::optional<ProcInfo>>& procs,
                                 int consecutive_errors) {
  NvidiaVerdict v;
  // extra_info has a row per GPU (its processes inside), the table a row per process.
  v.columns = {"PID", "TYPE", "USED MEMORY", "BAD ENV", "CONTAINER", "COMMAND"};
  v.empty_table = "no GPU processes\n";
  std::vector<VerdictFinding> errors, bad;
  size_t total = 0, supported = 0, graphics_only = 0;
  std::set<std::string> containers;  // where the processes run, for the healthy reason
  const Health error_health =
      consecutive_errors >= kProcessesErrorThreshold ? Health::kUnhealthy : Health::kHealthy;
  for (const auto& g : snapshot.gpus) {
    nlohmann::json jg = {{"uuid", g.uuid.value}, {"bus_id", g.pci_bus_id.value}};
    const auto& f = g.processes;
    if (f.supported()) ++supported;
    if (f.status == nvml::FieldStatus::kError) {
      errors.push_back(VerdictFinding::about(g, error_health, gpu_label(g) + ": " + f.error,
                                             std::nullopt, /*nvml_error=*/true));
      jg["error"] = f.error;
    }
    nlohmann::json list = nlohmann::json::array();
    if (f.ok()) {
      total += f.value.size();
      for (const auto& p : f.value) {
        if (!p.compute) ++graphics_only;
        auto it = procs.find(p.pid);
        if (it == procs.end() || !it->second) continue;  // vanished
        const ProcInfo& info = *it->second;
        nlohmann::json jp = {{"pid", p.pid},
                             {"type", process_type(p)},
                             {"name", info.name},
                             {"bad_env_vars_for_cuda", info.bad_env_vars}};
        if (info.cmdline) jp["cmd_args"] = *info.cmdline;
        bool mem_known = p.used_memory_bytes != nvml::NVML_VALUE_NOT_AVAILABLE_ULL;
        if (mem_known) jp["gpu_used_memory_bytes"] = p.used_memory_bytes;
        if (info.container) {
          runtimes::add_attribution(*info.container, jp);
          containers.insert(container_cell(info.container));
        }
        list.push_back(jp);
        std::string envs;
        for (const auto& var : info.bad_env_vars) {
          envs += (envs.empty() ? "" : ",") + var;
          bad.push_back(VerdictFinding::about(
              g, Health::kDegraded,
              "pid " + std::to_string(p.pid) + " on " + gpu_label(g) + " has " + var + " set",
              RepairAction::kCheckUserAppAndGpu));
        }
        GpuRow& row = v.gpus.emplace_back(g.index, nlohmann::json());
        row.in_data = false;
        row.cells = {std::to_string(p.pid),
                     std::string(process_type(p)),
                     mem_known ? std::to_string(p.used_memory_bytes >> 20) + " MiB" : "n/a",
                     envs.empty() ? "-" : envs,
                     container_cell(info.container),
                     info.name};
      }
    }
    jg["processes"] = list;
    GpuRow& row = v.gpus.emplace_back(g.index, std::move(jg));
    row.in_table = false;
  }
  v.data = {{"running_total", total}};
  if (!errors.empty()) {
    // NVML errors outweigh the environment findings; Unhealthy only once they persist.
    v.findings = std::move(errors);
    v.reason_suffix = " (detected " + std::to_string(consecutive_errors) + "/" +
                      std::to_string(kProcessesErrorThreshold) + " consecutive checks)";
  } else {
    v.findings = std::move(bad);
    v.reason_prefix = "bad CUDA environment variables set: ";
    v.action_description = "unset the profiling/debugging variables in the workload";
  }
  v.healthy_reason = supported == 0
                         ? "process listing not supported (not applicable)"
                         : std::to_string(total - graphics_only) + " GPU compute process(es)" +
                               (graphics_only == 0 ? ""
                                                   : " and " + std::to_string(graphics_only) +
                                                         " graphics process(es)") +
                               " running";
  // Whose they are, so that `gpud scan` names the pods without the JSON (a few; the data has all).
  if (!containers.empty()) {
    constexpr size_t kNamed = 3;
    std::string names;
    size_t n = 0;
    for (const std::string& c : containers) {
      if (n++ == kNamed) break;
      names += (names.empty() ? "" : ", ") + c;
    }
    if (containers.size() > kNamed) names += ", +" + std::to_string(containers.size() - kNamed);
    v.healthy_reason += " in " + names;
  }
  return v;
}

ProcessesComponent::ProcessesComponent(const ComponentContext& ctx)
    : NvidiaComponent(ctx, kMetrics), fs_(ctx.config->host_root) {}

CheckResult ProcessesComponent::evaluate(const nvml::NvmlSnapshot& snapshot) {
  consecutive_errors_ = processes_have_error(snapshot) ? consecutive_errors_ + 1 : 0;
  std::map<uint32_t, std::optional<ProcInfo>> procs;
  for (const auto& g : snapshot.gpus) {
    if (!g.processes.ok()) continue;
    for (const auto& p : g.processes.value)
      if (procs.count(p.pid) == 0) {
        auto info = read_proc_info(fs_, p.pid, ctx().config->serve_process_cmdlines);
        if (info) info->container = runtimes::attribute_pid(fs_, ctx().containers, p.pid);
        procs[p.pid] = std::move(info);
      }
  }
  return render_verdict(name(), evaluate_processes(snapshot, procs, consecutive_errors_));
}

}  // namespace gpud::components
