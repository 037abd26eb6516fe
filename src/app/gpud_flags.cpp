#include "app/gpud_flags.h"

#include <algorithm>
#include <array>

#include "core/strings.h"

namespace gpud::app {

namespace {

constexpr unsigned kRS = kGpudRun | kGpudScan;
constexpr unsigned kRU = kGpudRun | kGpudUp;
constexpr unsigned kAll = kGpudRun | kGpudScan | kGpudUp;

using U = GpudFlagUse;

constexpr std::string_view kScenarioRoute =
    "FAKE_NVML_SCENARIO=testing/fixtures/nvml/";  // + "<file>.json"

// GPUd's cmd/gpud/command/command.go, verb by verb, in its order.
constexpr auto kFlags = std::to_array<GpudFlag>({
    {"data-dir", kRU, true, U::kImplemented, ""},
    {"db-in-memory", kRU, false, U::kImplemented, ""},
    {"endpoint", kRU, true, U::kControlPlane, ""},
    {"machine-id", kRU, true, U::kControlPlane, ""},
    {"machine-id-overwrite", kRU, false, U::kControlPlane, ""},
    {"refresh-session-token", kRU, false, U::kControlPlane, ""},
    {"token", kRU, true, U::kControlPlane, ""},
    {"log-level", kAll, true, U::kImplemented, ""},
    {"log-file", kGpudRun, true, U::kImplemented, ""},
    {"listen-address", kGpudRun, true, U::kImplemented, ""},
    {"pprof", kGpudRun, false, U::kControlPlane, ""},
    {"enable-auto-update", kGpudRun, false, U::kControlPlane, ""},
    {"auto-update-exit-code", kGpudRun, true, U::kControlPlane, ""},
    {"reboot-commands", kGpudRun, true, U::kControlPlane, ""},
    {"findmnt-commands", kGpudRun, true, U::kHostCommand, ""},
    {"lsblk-commands", kGpudRun, true, U::kHostCommand, ""},
    {"blockdev-usage-commands", kGpudRun, true, U::kHostCommand, ""},
    {"nfs-host-root", kGpudRun, true, U::kImplemented, ""},
    {"containerd-service-active-commands", kGpudRun, true, U::kHostCommand, ""},
    {"version-file", kGpudRun, true, U::kControlPlane, ""},
    {"plugin-specs-file", kGpudRun, true, U::kImplemented, ""},
    {"components", kGpudRun, true, U::kImplemented, ""},
    {"skip-session-update-config", kGpudRun, false, U::kControlPlane, ""},
    {"session-protocol", kRU, true, U::kControlPlane, ""},
    {"metrics-retention-period", kGpudRun, true, U::kImplemented, ""},
    {"retention-period", kGpudRun, true, U::kImplemented, ""},
    {"events-retention-period", kRS, true, U::kImplemented, ""},
    {"gpu-count", kAll, true, U::kImplemented, ""},
    {"infiniband-expected-port-states", kRS, true, U::kImplemented, ""},
    {"infiniband-flap-auto-clear-window", kGpudRun, true, U::kImplemented, ""},
    {"nvlink-expected-link-states", kRS, true, U::kImplemented, ""},
    {"nfs-checker-configs", kRS, true, U::kImplemented, ""},
    {"xid-reboot-threshold", kRS, true, U::kImplemented, ""},
    {"xid-thresholds", kGpudRun, true, U::kImplemented, ""},
    {"sxid-thresholds", kGpudRun, true, U::kImplemented, ""},
    {"os-blocked-process-name-regexes", kRS, true, U::kImplemented, ""},
    {"os-blocked-process-persistence-threshold", kRS, true, U::kImplemented, ""},
    {"xid-lookback-period", kRS, true, U::kImplemented, ""},
    {"sxid-lookback-period", kRS, true, U::kImplemented, ""},
    {"threshold-celsius-slowdown-margin", kRS, true, U::kImplemented, ""},
    {"infiniband-exclude-devices", kRS, true, U::kImplemented, ""},
    {"infiniband-class-root-dir", kRS, true, U::kImplemented, ""},
    {"gpu-product-name", kRS, true, U::kRefused,
     "a scenario file whose GPUs carry the product name (\"name\"), e.g. "
     "FAKE_NVML_SCENARIO=testing/fixtures/nvml/h100x8-healthy.json"},
    {"gpu-uuids-with-row-remapping-pending", kRS, true, U::kRefused, "h100x8-row-remap-pending"},
    {"gpu-uuids-with-row-remapping-failed", kRS, true, U::kRefused, "h100x8-row-remap-failed"},
    {"gpu-uuids-with-hw-slowdown", kRS, true, U::kRefused, "h100x8-hw-slowdown"},
    {"gpu-uuids-with-hw-slowdown-thermal", kRS, true, U::kRefused, "h100x8-hw-slowdown"},
    {"gpu-uuids-with-hw-slowdown-power-brake", kRS, true, U::kRefused, "h100x8-hw-slowdown"},
    {"gpu-uuids-with-gpu-lost", kRS, true, U::kRefused, "h100x8-gpu-lost"},
    {"gpu-uuids-with-gpu-requires-reset", kRS, true, U::kRefused, "h100x8-gpu-reset-required"},
    {"gpu-uuids-with-fabric-state-health-summary-unhealthy", kRS, true, U::kRefused,
     "h100x8-fabric-degraded"},
    {"nvml-device-get-devices-error", kGpudRun, false, U::kRefused,
     "a scenario file with \"errors\": {\"nvmlDeviceGetHandleByIndex\": \"UNKNOWN\"} "
     "(testing/fake_nvml/README.md)"},
    {"containerd-socket-missing", kRS, false, U::kRefused,
     "--containerd-socket /nonexistent/containerd.sock"},
    // `up` only: what GPUd's login sends.
    {"private-ip", kGpudUp, true, U::kControlPlane, ""},
    {"public-ip", kGpudUp, true, U::kControlPlane, ""},
    {"region", kGpudUp, true, U::kControlPlane, ""},
    {"node-group", kGpudUp, true, U::kControlPlane, ""},
    {"node-labels", kGpudUp, true, U::kControlPlane, ""},
});

// What the refusal of a test injector says.
std::string refusal(const GpudFlag& f) {
  std::string use(f.instead);
  if (use.find(' ') == std::string::npos)  // a scenario's name
    use = std::string(kScenarioRoute) + use + ".json";
  return "--" + std::string(f.name) +
         " is GPUd's test injector; gpud fakes GPU faults with its fake NVML library instead: " +
         use + " gpud run --nvml-lib build/libnvidia-ml.so.1 (testing/fake_nvml/README.md)";
}

}  // namespace

std::span<const GpudFlag> gpud_flags() { return kFlags; }

std::string_view use_name(GpudFlagUse use) {
  switch (use) {
    case U::kImplemented: return "implemented";
    case U::kControlPlane: return "control plane";
    case U::kHostCommand: return "host command";
    case U::kRefused: return "refused";
  }
  return "";
}

void add_gpud_flags(CLI::App& cmd, GpudVerb verb, GpudFlagsGiven& given) {
  for (const GpudFlag& f : kFlags) {
    if ((f.verbs & verb) == 0 || f.use == U::kImplemented) continue;
    const std::string name = "--" + std::string(f.name);
    if (f.use == U::kRefused) {
      auto fail = [name, message = refusal(f)] { throw CLI::ValidationError(name, message); };
      CLI::Option* o = f.takes_value ? cmd.add_option_function<std::string>(
                                           name, [fail](const std::string&) { fail(); })
                                     : cmd.add_flag_function(name, [fail](int64_t) { fail(); });
      o->description("Refused: GPUd's test injector; use a fake-NVML scenario")
          ->group(kGpudRefusedGroup);
      continue;
    }
    std::vector<std::string>* list =
        f.use == U::kControlPlane ? &given.control_plane : &given.host_command;
    std::string note = f.use == U::kControlPlane ? "no managed control plane in gpud"
                                                 : "gpud reads the host itself";
    auto record = [list, name] {
      if (std::find(list->begin(), list->end(), name) == list->end()) list->push_back(name);
    };
    // Recorded whenever given, `--enable-auto-update=false` too (add_flag_callback skips false).
    CLI::Option* o = f.takes_value ? cmd.add_option_function<std::string>(
                                         name, [record](const std::string&) { record(); })
                                   : cmd.add_flag_function(name, [record](int64_t) { record(); });
    o->description("Accepted for GPUd's users, not used: " + note)->group(kGpudAcceptedGroup);
  }
}

std::vector<std::string> gpud_flag_warnings(const GpudFlagsGiven& given) {
  std::vector<std::string> lines;
  if (!given.control_plane.empty())
    lines.push_back(
        "gpud has no managed control plane (no login, session, machine id, remote reboot, "
        "auto-update or pprof): it serves its health API on this node only, and is updated with "
        "its package or `gpud up`; ignored: " +
        join(given.control_plane, ", "));
  if (!given.host_command.empty())
    lines.push_back(
        "gpud runs no findmnt, lsblk, df or systemctl for its checks: it reads /proc, /sys and "
        "statfs under --host-root, and containerd's socket, directly (in a container, mount the "
        "host and give --host-root); ignored: " +
        join(given.host_command, ", "));
  return lines;
}

}  // namespace gpud::app
