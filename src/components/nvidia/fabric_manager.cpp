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

#include "core/log.h"
#include "core/time_util.h"
#include "host/command.h"
#include "host/os_info.h"
#include "host/processes.h"
#include "host/systemctl.h"

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

NvidiaVerdict evaluate_fabric_manager(const nvml::NvmlSnapshot& snapshot,
                                      const FabricManagerProbe& probe) {
  const std::string product = product_of(snapshot);
  const catalog::ProductCaps caps = caps_of(snapshot);
  NvidiaVerdict v;
  bool state_supported = caps.fabric_state;
  // A single GPU, or GPUs with no sign of a fabric, are on none: NVML answers "Not Supported" there
  // (a lone H200 on driver 580 does), which is not a fault.
  bool state_checked = state_supported && nvlink_fabric_present(snapshot, probe);
  if (state_checked) {
    int unhealthy_gpus = 0;
    v.columns = {"UUID", "STATE", "STATUS", "SUMMARY", "HEALTH"};
    for (const auto& g : snapshot.gpus) {
      const auto& f = g.fabric;
      // Only GPUs whose fabric state was read are in extra_info's "gpus".
      GpuRow& row = v.gpus.emplace_back(
          g.index, nlohmann::json{{"gpu_uuid", g.uuid.value}, {"bus_id", g.pci_bus_id.value}});
      row.in_data = f.ok();
      if (!f.supported()) {
        row.cells = {g.uuid.value, "not supported", "-", "-", "-"};
        continue;
      }
      std::vector<std::string> gi;
      bool training = false;
      if (f.status == nvml::FieldStatus::kError) {
        gi.push_back(f.error);
        row.cells = {g.uuid.value, "error", "-", "-", "-"};
      } else {
        const auto& fi = f.value;
        // A fabric still training within the grace after boot or a fabric manager start.
        training = fi.state == nvml::NVML_GPU_FABRIC_STATE_IN_PROGRESS && probe.training_elapsed &&
                   *probe.training_elapsed < probe.training_grace;
        if (training)
          ;  // reported below as Initializing, not as an issue
        else if (fi.state != nvml::NVML_GPU_FABRIC_STATE_COMPLETED)
          gi.push_back("state=" + std::string(state_name(fi.state)));
        else if (fi.status != nvml::NVML_SUCCESS)
          gi.push_back("status=" + std::to_string(fi.status));
        if (fi.health_summary == nvml::NVML_GPU_FABRIC_HEALTH_SUMMARY_UNHEALTHY ||
            fi.health_summary == nvml::NVML_GPU_FABRIC_HEALTH_SUMMARY_LIMITED_CAPACITY)
          gi.push_back("summary=" + std::string(summary_name(fi.health_summary)));
        if (fi.health_degraded_bandwidth()) gi.push_back("degraded bandwidth");
        if (fi.health_route_recovery_in_progress()) gi.push_back("route recovery in progress");
        if (fi.health_route_unhealthy()) gi.push_back("route unhealthy");
        if (fi.health_access_timeout_recovery())
          gi.push_back("access timeout recovery in progress");
        if (auto c = fi.health_incorrect_configuration(); !c.empty()) gi.push_back(c);
        row.data["clique_id"] = fi.clique_id;
        row.data["cluster_uuid"] = fi.cluster_uuid;
        row.data["state"] = state_name(fi.state);
        row.data["status"] = fi.status;
        row.data["summary"] = summary_name(fi.health_summary);
        row.data["health"] = {
            {"bandwidth", fi.health_degraded_bandwidth() ? "Degraded" : "Full"},
            {"route_recovery_in_progress", fi.health_route_recovery_in_progress()},
            {"route_unhealthy", fi.health_route_unhealthy()},
            {"access_timeout_recovery", fi.health_access_timeout_recovery()},
            {"incorrect_configuration", fi.health_incorrect_configuration()}};
        std::string h;
        for (size_t i = (fi.state != nvml::NVML_GPU_FABRIC_STATE_COMPLETED && !training ? 1 : 0);
             i < gi.size(); ++i)
          h += (h.empty() ? "" : ", ") + gi[i];
        row.cells = {g.uuid.value, std::string(state_name(fi.state)), std::to_string(fi.status),
                     std::string(summary_name(fi.health_summary)),
                     gi.empty() ? "ok" : (h.empty() ? "-" : h)};
      }
      if (!gi.empty()) {
        std::string s;
        for (const auto& x : gi) s += (s.empty() ? "" : ", ") + x;
        // The first GPU's issue names the product for all of them.
        v.add(g, Health::kUnhealthy,
              (unhealthy_gpus++ == 0 ? product + " with unhealthy fabric state: " : "") + "GPU " +
                  g.uuid.value + ": " + s,
              RepairAction::kRebootSystem);
        v.action_description =
            "reboot the system: the GPU registers with the fabric again at boot; a fabric still "
            "degraded after a reboot needs the NVSwitch trays and NVLink cabling inspected";
      }
      if (training) {
        row.data["training_elapsed_seconds"] = probe.training_elapsed->count();
        v.add(g, Health::kInitializing,
              "GPU " + g.uuid.value + ": fabric still training (state In Progress) " +
                  std::to_string(probe.training_elapsed->count()) +
                  " s after boot or the fabric manager's start; Unhealthy if not Completed by " +
                  std::to_string(probe.training_grace.count()) + " s");
      }
    }
  } else {
    v.data["gpus"] = nlohmann::json::array();
  }
  bool service_expected = fabric_manager_service_expected(caps, probe);
  v.data["product"] = product;
  v.data["fabric_state_supported"] = state_supported;
  v.data["fabric_state_checked"] = state_checked;
  v.data["fabric_manager_supported"] = caps.fabric_manager;
  v.data["service_checked"] = service_expected;
  if (probe.nvswitches) v.data["nvswitches"] = *probe.nvswitches;
  if (service_expected) {
    v.data["fabric_manager_found"] = probe.binary_found;
    v.data["fabric_manager_active"] = probe.port_open;
  }
  if (probe.nothing_to_do_at) v.data["nothing_to_do_at"] = format_rfc3339(*probe.nothing_to_do_at);
  // The state's part of the reason, when it has no issue, is a note.
  if (v.findings.empty()) {
    if (state_supported && !state_checked)
      v.add(Health::kHealthy, snapshot.gpus.size() < 2
                                  ? "single GPU, fabric state not checked"
                                  : "no NVSwitch or active NVLink, fabric state not checked");
    else if (state_checked)
      v.add(Health::kHealthy, "fabric state healthy on all GPUs");
  }
  // The service's part ends every reason.
  Health svc_health = Health::kHealthy;
  std::string svc;
  if (!caps.fabric_manager) {
    svc = "does not support fabric manager";
  } else if (!service_expected) {
    svc = "NVSwitch not detected, skipping fabric manager check";
  } else if (!probe.binary_found) {
    svc_health = Health::kUnhealthy;
    svc = "fabric manager supported but nv-fabricmanager executable not found";
  } else if (!probe.port_open && probe.nothing_to_do_at) {
    // GPUd's exception: the fabric manager said there is nothing for it to manage and stopped.
    svc = "fabric manager found but not active: it logged NV_WARN_NOTHING_TO_DO at " +
          format_rfc3339(*probe.nothing_to_do_at) + " (nothing to manage), not a fault";
  } else if (!probe.port_open) {
    svc_health = Health::kUnhealthy;
    svc = "fabric manager found but not active (localhost:" + std::to_string(kFabricManagerPort) +
          " not answering)";
  } else {
    svc = "fabric manager found and active";
  }
  v.add(svc_health, svc);
  v.detail_postscript = "fabric manager: " + svc + "\n";
  return v;
}

std::optional<TimePoint> process_start_time(const host::HostFs& fs, std::string_view comm,
                                            TimePoint boot_time) {
  std::optional<TimePoint> oldest;
  for (const auto& p : host::scan_processes(fs).processes) {
    if (p.comm != comm) continue;
    auto after = host::started_after_boot(p);
    if (!after) continue;
    const TimePoint start = boot_time + std::chrono::duration_cast<TimePoint::duration>(*after);
    if (!oldest || start < *oldest) oldest = start;
  }
  return oldest;
}

namespace {

std::string fabric_manager_log_path(const Config& c) {
  if (!c.fabric_manager_log_file.empty()) return c.fabric_manager_log_file;
  return host::HostFs(c.host_root).path("/var/log/fabricmanager.log");
}

}  // namespace

FabricManagerComponent::FabricManagerComponent(const ComponentContext& ctx)
    : NvidiaComponent(ctx),
      fs_(ctx.config->host_root),
      log_(fabric_manager_log_path(*ctx.config)) {}

std::optional<TimePoint> FabricManagerComponent::read_log(bool journal,
                                                          std::vector<std::string>& errors) {
  std::lock_guard lock(log_mu_);
  const TimePoint now = Clock::now();
  std::optional<FabricManagerLogReader::Journal> j;
  if (journal) {
    const char* env = std::getenv("PATH");
    std::string search(env != nullptr ? env : host::kDefaultSearchPath);
    if (auto exe = host::find_executable("journalctl", search))
      j = FabricManagerLogReader::Journal{*exe, search, fs_.root() == "/" ? "" : fs_.root()};
  }
  auto read = log_.read(name(), j, now);
  for (auto& e : read.errors) errors.push_back(std::move(e));
  for (auto& e : read.events) {
    if (e.name == kFmNothingToDo && (!nothing_to_do_at_ || e.time > *nothing_to_do_at_))
      nothing_to_do_at_ = e.time;
    if (ctx().events != nullptr) record(std::move(e));
  }
  const TimePoint since = now - kNothingToDoWindow;
  std::optional<TimePoint> latest;
  if (ctx().events != nullptr) {
    // The store also holds what a previous run read (and what this one just recorded).
    if (auto stored = ctx().events->query(name(), since, now + std::chrono::minutes(1))) {
      for (const auto& e : *stored)
        if (e.name == kFmNothingToDo && (!latest || e.time > *latest)) latest = e.time;
    } else {
      errors.push_back("events: " + stored.error().message);
    }
  }
  if (!latest && nothing_to_do_at_ && *nothing_to_do_at_ > since) latest = nothing_to_do_at_;
  return latest;
}

std::optional<std::chrono::seconds> FabricManagerComponent::training_elapsed(TimePoint now) const {
  auto boot = host::read_boot_time(fs_, now);
  if (!boot) return std::nullopt;
  TimePoint since = *boot;
  // comm is cut at 15 characters: "nv-fabricmanager" reads "nv-fabricmanage".
  if (auto started = process_start_time(fs_, "nv-fabricmanage", *boot); started && *started > since)
    since = *started;
  if (since > now) return std::chrono::seconds(0);
  return std::chrono::duration_cast<std::chrono::seconds>(now - since);
}

CheckResult FabricManagerComponent::evaluate(const nvml::NvmlSnapshot& snapshot) {
  FabricManagerProbe probe;
  const catalog::ProductCaps caps = caps_of(snapshot);
  if (caps.fabric_manager || caps.fabric_state) probe.nvswitches = count_nvswitches(fs_);
  if (caps.fabric_manager) {
    // In a container the host's fabric manager is under --host-root (the GPU Operator's driver
    // container puts it in the driver root), not on gpud's own PATH.
    probe.binary_found =
        host::find_host_executable(config().host_root, "nv-fabricmanager",
                                   config().executable_search_path, {"/run/nvidia/driver"})
            .has_value();
    if (fabric_manager_service_expected(caps, probe) && probe.binary_found)
      probe.port_open = tcp_port_answers(kFabricManagerPort, std::chrono::seconds(1));
  }
  // The log is read wherever it exists; the unit's journal where the service is expected and
  // systemd runs the host.
  std::vector<std::string> log_errors;
  const bool journal = fabric_manager_service_expected(caps, probe) && probe.binary_found &&
                       host::systemd_running(fs_);
  probe.nothing_to_do_at = read_log(journal, log_errors);
  probe.training_grace = config().fabric_manager_training_grace;
  probe.training_elapsed = training_elapsed(Clock::now());
  NvidiaVerdict v = evaluate_fabric_manager(snapshot, probe);
  if (!log_errors.empty()) {
    // Not a fault of the fabric: said in the data and logged, the health is the rule's.
    v.data["log_errors"] = log_errors;
    if (auto left_out = log_limiter_.admit())
      logger(name())->warn("fabric manager log: {} ({} alike left out)", log_errors.front(),
                           *left_out);
  }
  return render_verdict(name(), v);
}

}  // namespace gpud::components
