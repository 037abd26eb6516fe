#include "components/nvidia/fabric_manager.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>

#include "components/nvidia/gpu_issues.h"

namespace gpud::components {
namespace {

std::string_view state_name(uint8_t state) {
  switch (state) {
    case nvml::NVML_GPU_FABRIC_STATE_NOT_SUPPORTED: return "Not Supported";
    case nvml::NVML_GPU_FABRIC_STATE_NOT_STARTED: return "Not Started";
    case nvml::NVML_GPU_FABRIC_STATE_IN_PROGRESS: return "In Progress";
    case nvml::NVML_GPU_FABRIC_STATE_COMPLETED: return "Completed";
    default: return "Unknown";
  }
}

std::string_view summary_name(uint8_t s) {
  switch (s) {
    case nvml::NVML_GPU_FABRIC_HEALTH_SUMMARY_HEALTHY: return "Healthy";
    case nvml::NVML_GPU_FABRIC_HEALTH_SUMMARY_UNHEALTHY: return "Unhealthy";
    case nvml::NVML_GPU_FABRIC_HEALTH_SUMMARY_LIMITED_CAPACITY: return "Limited Capacity";
    default: return "Not Supported";
  }
}

}  // namespace

std::optional<int> count_nvswitches(const host::HostFs& fs) {
  auto devs = fs.list("/sys/bus/pci/devices");
  if (!devs) return std::nullopt;
  int n = 0;
  for (const auto& d : *devs) {
    std::string base = "/sys/bus/pci/devices/" + d;
    auto vendor = fs.read_line(base + "/vendor");
    auto cls = fs.read_line(base + "/class");
    if (vendor && cls && *vendor == "0x10de" && cls->rfind("0x0680", 0) == 0) ++n;
  }
  return n;
}

bool executable_on_path(std::string_view name, std::string_view path_env) {
  size_t start = 0;
  while (start <= path_env.size()) {
    size_t end = path_env.find(':', start);
    if (end == std::string_view::npos) end = path_env.size();
    std::string dir(path_env.substr(start, end - start));
    if (!dir.empty()) {
      std::string p = dir + "/" + std::string(name);
      struct stat st;
      if (::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(p.c_str(), X_OK) == 0)
        return true;
    }
    start = end + 1;
  }
  return false;
}

bool tcp_port_answers(int port, std::chrono::milliseconds timeout) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bool ok = false;
  int rc = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  if (rc == 0) {
    ok = true;
  } else if (errno == EINPROGRESS) {
    pollfd p{fd, POLLOUT, 0};
    if (::poll(&p, 1, static_cast<int>(timeout.count())) == 1) {
      int err = 0;
      socklen_t len = sizeof err;
      ok = ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err == 0;
    }
  }
  ::close(fd);
  return ok;
}

bool nvlink_fabric_present(const nvml::NvmlSnapshot& snapshot, const FabricManagerProbe& probe) {
  if (snapshot.gpus.size() < 2) return false;
  if (probe.nvswitches && *probe.nvswitches > 0) return true;
  for (const auto& g : snapshot.gpus) {
    // A GPU that reports a fabric state of its own has joined (or is joining) a fabric, even with
    // every link down: exactly the case the fabric state is there to catch.
    if (g.fabric.ok() && g.fabric.value.state != nvml::NVML_GPU_FABRIC_STATE_NOT_SUPPORTED)
      return true;
    if (!g.nvlinks.ok()) continue;
    for (const auto& l : g.nvlinks.value)
      if (l.active.ok() && l.active.value) return true;
  }
  return false;
}

bool fabric_manager_service_expected(const catalog::ProductCaps& caps,
                                     const FabricManagerProbe& probe) {
  if (!caps.fabric_manager) return false;
  if (probe.nvswitches) return *probe.nvswitches > 0;
  return probe.binary_found;
}

CheckResult evaluate_fabric_manager(const nvml::NvmlSnapshot& snapshot,
                                    const FabricManagerProbe& probe) {
  const std::string product = product_of(snapshot);
  const catalog::ProductCaps caps = caps_of(snapshot);
  nlohmann::json gpus = nlohmann::json::array();
  std::vector<std::vector<std::string>> rows = {
      {"GPU", "UUID", "STATE", "STATUS", "SUMMARY", "HEALTH"}};
  std::string issues;
  bool state_supported = caps.fabric_state;
  // A single GPU, or GPUs with no sign of a fabric, are on none: NVML answers "Not Supported" there
  // (a lone H200 on driver 580 does), which is not a fault.
  bool state_checked = state_supported && nvlink_fabric_present(snapshot, probe);
  if (state_checked) {
    for (const auto& g : snapshot.gpus) {
      const auto& f = g.fabric;
      if (!f.supported()) {
        rows.push_back({std::to_string(g.index), g.uuid.value, "not supported", "-", "-", "-"});
        continue;
      }
      std::vector<std::string> gi;
      if (f.status == nvml::FieldStatus::kError) {
        gi.push_back(f.error);
        rows.push_back({std::to_string(g.index), g.uuid.value, "error", "-", "-", "-"});
      } else {
        const auto& v = f.value;
        if (v.state != nvml::NVML_GPU_FABRIC_STATE_COMPLETED)
          gi.push_back("state=" + std::string(state_name(v.state)));
        else if (v.status != nvml::NVML_SUCCESS)
          gi.push_back("status=" + std::to_string(v.status));
        if (v.health_summary == nvml::NVML_GPU_FABRIC_HEALTH_SUMMARY_UNHEALTHY ||
            v.health_summary == nvml::NVML_GPU_FABRIC_HEALTH_SUMMARY_LIMITED_CAPACITY)
          gi.push_back("summary=" + std::string(summary_name(v.health_summary)));
        if (v.health_degraded_bandwidth()) gi.push_back("degraded bandwidth");
        if (v.health_route_recovery_in_progress()) gi.push_back("route recovery in progress");
        if (v.health_route_unhealthy()) gi.push_back("route unhealthy");
        if (v.health_access_timeout_recovery()) gi.push_back("access timeout recovery in progress");
        if (auto c = v.health_incorrect_configuration(); !c.empty()) gi.push_back(c);
        gpus.push_back({{"gpu_uuid", g.uuid.value},
                        {"bus_id", g.pci_bus_id.value},
                        {"clique_id", v.clique_id},
                        {"cluster_uuid", v.cluster_uuid},
                        {"state", state_name(v.state)},
                        {"status", v.status},
                        {"summary", summary_name(v.health_summary)},
                        {"health",
                         {{"bandwidth", v.health_degraded_bandwidth() ? "Degraded" : "Full"},
                          {"route_recovery_in_progress", v.health_route_recovery_in_progress()},
                          {"route_unhealthy", v.health_route_unhealthy()},
                          {"access_timeout_recovery", v.health_access_timeout_recovery()},
                          {"incorrect_configuration", v.health_incorrect_configuration()}}}});
        std::string h;
        for (size_t i = (v.state != nvml::NVML_GPU_FABRIC_STATE_COMPLETED ? 1 : 0); i < gi.size();
             ++i)
          h += (h.empty() ? "" : ", ") + gi[i];
        rows.push_back({std::to_string(g.index), g.uuid.value, std::string(state_name(v.state)),
                        std::to_string(v.status), std::string(summary_name(v.health_summary)),
                        gi.empty() ? "ok" : (h.empty() ? "-" : h)});
      }
      if (!gi.empty()) {
        std::string s;
        for (const auto& x : gi) s += (s.empty() ? "" : ", ") + x;
        issues += (issues.empty() ? "" : "; ") + std::string("GPU ") + g.uuid.value + ": " + s;
      }
    }
  }
  bool service_expected = fabric_manager_service_expected(caps, probe);
  nlohmann::json data = {{"product", product},
                         {"fabric_state_supported", state_supported},
                         {"fabric_state_checked", state_checked},
                         {"fabric_manager_supported", caps.fabric_manager},
                         {"gpus", gpus},
                         {"service_checked", service_expected}};
  if (probe.nvswitches) data["nvswitches"] = *probe.nvswitches;
  if (service_expected) {
    data["fabric_manager_found"] = probe.binary_found;
    data["fabric_manager_active"] = probe.port_open;
  }
  std::string detail = state_checked ? format_table(rows) : "";
  std::string reason;
  Health h = Health::kHealthy;
  if (!issues.empty()) {
    h = Health::kUnhealthy;
    reason = product + " with unhealthy fabric state: " + issues;
  }
  std::string svc;
  if (!caps.fabric_manager) {
    svc = "does not support fabric manager";
  } else if (!service_expected) {
    svc = "NVSwitch not detected, skipping fabric manager check";
  } else if (!probe.binary_found) {
    h = Health::kUnhealthy;
    svc = "fabric manager supported but nv-fabricmanager executable not found";
  } else if (!probe.port_open) {
    h = Health::kUnhealthy;
    svc = "fabric manager found but not active (localhost:" + std::to_string(kFabricManagerPort) +
          " not answering)";
  } else {
    svc = "fabric manager found and active";
  }
  if (reason.empty() && state_checked) reason = "fabric state healthy on all GPUs";
  if (state_supported && !state_checked)
    reason = snapshot.gpus.size() < 2 ? "single GPU, fabric state not checked"
                                      : "no NVSwitch or active NVLink, fabric state not checked";
  reason += (reason.empty() ? "" : "; ") + svc;
  detail += "fabric manager: " + svc + "\n";
  return data_result(kFabricManagerName, h, reason, data, detail);
}

FabricManagerComponent::FabricManagerComponent(const ComponentContext& ctx)
    : NvidiaComponent(ctx), fs_(ctx.config->host_root) {}

CheckResult FabricManagerComponent::evaluate(const nvml::NvmlSnapshot& snapshot) {
  FabricManagerProbe probe;
  const catalog::ProductCaps caps = caps_of(snapshot);
  if (caps.fabric_manager || caps.fabric_state) probe.nvswitches = count_nvswitches(fs_);
  if (caps.fabric_manager) {
    const char* path = std::getenv("PATH");
    probe.binary_found = executable_on_path("nv-fabricmanager", path != nullptr ? path : "");
    if (fabric_manager_service_expected(caps, probe) && probe.binary_found)
      probe.port_open = tcp_port_answers(kFabricManagerPort, std::chrono::seconds(1));
  }
  return evaluate_fabric_manager(snapshot, probe);
}

}  // namespace gpud::components
