#include "components/nvidia/infiniband.h"

#include <fmt/format.h>
#include <re2/re2.h>

#include <algorithm>

#include "components/snapshot_metric.h"
#include "core/pci_address.h"
#include "core/reboot_rules.h"
#include "core/strings.h"
#include "core/time_util.h"
#include "host/pci.h"
#include "kmsg/parser.h"

namespace gpud::components {
namespace {

// The start of a message mlx5_core prints about one of its devices: dev_printk's "<driver>
// <device>: " ("mlx5_core 0000:5e:00.0: "; a sub-function's "mlx5_core.sf mlx5_core.sf.2: "), the
// device as group 1 when `capture_device`, then what mlx5_core_warn, mlx5_core_err and their _rl
// forms add, "<function>:<line>:(pid <pid>): " (drivers/net/ethernet/mellanox/mlx5/core/
// mlx5_core.h; older drivers put the device's name and ':' before the function; mlx5_core_info adds
// nothing). A rule that starts with this matches only a message the driver began, never its text
// quoted in another message.
std::string mlx5_message_start(bool capture_device) {
  return std::string(kmsg::kMessageStart) + "mlx5_core(?:\\.[a-z]+)? " +
         (capture_device ? "(\\S+)" : "\\S+") + ": (?:\\S+:\\d+:\\(pid \\d+\\): )?";
}

// The device of a match: a PCI address names the adapter's function ("pci_bus_id"), a
// sub-function's name ("mlx5_core.sf.2") is kept as it is ("device").
void name_device(kmsg::Match& m, const std::string& device) {
  static const RE2 kPci(R"([0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])");
  if (RE2::FullMatch(device, kPci)) {
    const std::string pci = normalize_pci_bus_id(device);
    m.extra_info["pci_bus_id"] = pci;
    m.message += " (PCI device " + pci + ")";
  } else if (!device.empty()) {
    m.extra_info["device"] = kmsg::sanitize_utf8(device);
    m.message += " (" + kmsg::sanitize_utf8(device) + ")";
  }
}

kmsg::Match mlx5_match(std::string_view line, std::string name, std::string message,
                       const std::string& device) {
  kmsg::Match m;
  m.name = std::move(name);
  m.message = kmsg::sanitize_utf8(message);
  m.extra_info = {{"log_line", kmsg::log_line_excerpt(line)}};
  name_device(m, device);
  return m;
}

std::optional<kmsg::Match> match_access_reg(std::string_view s) {
  // mlx5_cmd_out_err (drivers/net/ethernet/mellanox/mlx5/core/cmd.c) through mlx5_core_err_rl:
  // "%s(0x%x) op_mod(0x%x) failed, status %s(0x%x), syndrome (0x%x), err(%d)".
  static const RE2 kRe(mlx5_message_start(true) +
                       R"(ACCESS_REG\(0x[0-9a-fA-F]+\) op_mod\(0x[0-9a-fA-F]+\) failed)");
  std::string device;
  if (!RE2::PartialMatch(re2::StringPiece(s.data(), s.size()), kRe, &device)) return std::nullopt;
  return mlx5_match(s, "access_reg_failed",
                    "MLX5 ACCESS_REG command failed - device may have restricted PF access",
                    device);
}

// health.c poll_health: the firmware's health counter stood still for three polls. 3.x-4.10
// "device's health compromised", 4.11-6.x "device's health compromised - reached miss count".
std::optional<kmsg::Match> match_health_compromised(std::string_view s) {
  static const RE2 kRe(mlx5_message_start(true) + R"(device's health compromised)");
  std::string device;
  if (!RE2::PartialMatch(re2::StringPiece(s.data(), s.size()), kRe, &device)) return std::nullopt;
  auto m = mlx5_match(s, kMlx5HealthCompromisedEvent,
                      "MLX5 device health compromised: its firmware stopped answering", device);
  m.type = EventType::kFatal;
  return m;
}

// health.c poll_health (4.13-6.x): "Fatal error %u detected", the first fatal sensor of
// check_fatal_sensors: 1 PCI reads fail (all ones), 2 the PCI channel is offline, 3 the NIC
// interface is disabled, 4 a NIC software reset, 5 the firmware asks for a reset (syndrome).
std::optional<kmsg::Match> match_fatal_error(std::string_view s) {
  static const RE2 kRe(mlx5_message_start(true) + R"(Fatal error (\d+) detected)");
  std::string device;
  int code = 0;
  if (!RE2::PartialMatch(re2::StringPiece(s.data(), s.size()), kRe, &device, &code))
    return std::nullopt;
  static constexpr std::string_view kSensors[] = {
      "",          "PCI reads fail",           "PCI channel offline", "NIC interface disabled",
      "NIC reset", "firmware asks for a reset"};
  std::string what = fmt::format("MLX5 fatal error {}", code);
  if (code > 0 && code < static_cast<int>(std::size(kSensors)))
    what += fmt::format(" ({})", kSensors[code]);
  auto m = mlx5_match(s, kMlx5FatalErrorEvent, what, device);
  m.type = EventType::kFatal;
  m.extra_info["fatal_error"] = code;
  return m;
}

// health.c print_health_info, printed after the two lines above: 3.x-5.x "synd 0x%x: %s", 5.18+
// "Health issue observed, %s, severity(%d) %s:" (the syndrome's text, the firmware's log level).
std::optional<kmsg::Match> match_syndrome(std::string_view s) {
  static const RE2 kOld(mlx5_message_start(true) + R"(synd 0x([0-9a-fA-F]+): (.+))");
  static const RE2 kNew(mlx5_message_start(true) +
                        R"(Health issue observed, (.+), severity\((\d+)\) ([A-Za-z ]+):)");
  const re2::StringPiece in(s.data(), s.size());
  std::string device, text, level;
  std::string synd;
  int severity = -1;
  if (RE2::PartialMatch(in, kOld, &device, &synd, &text)) {
  } else if (!RE2::PartialMatch(in, kNew, &device, &text, &severity, &level)) {
    return std::nullopt;
  }
  auto m = mlx5_match(s, kMlx5FirmwareSyndromeEvent, "MLX5 firmware syndrome: " + text, device);
  m.extra_info["syndrome"] = kmsg::sanitize_utf8(text);
  if (!synd.empty()) m.extra_info["synd"] = "0x" + synd;
  if (severity >= 0) m.extra_info["severity"] = kmsg::sanitize_utf8(level);
  return m;
}

// cmd.c: a firmware command that never completed. 3.x-6.x wait_func "%s(0x%x) timeout. Will
// cause a leak of a command resource"; 5.9+ cb_timeout_handler "cmd[%d]: %s(0x%x) Async,
// timeout. Will cause ..." (5.10+ wait_func_handle_exec_timeout's "No done completion" line
// before it is not a second timeout).
std::optional<kmsg::Match> match_cmd_timeout(std::string_view s) {
  static const RE2 kRe(mlx5_message_start(true) +
                       R"((?:cmd\[\d+\]: )?(\w+)\(0x[0-9a-fA-F]+\)(?: Async,)? timeout\. Will )"
                       R"(cause a leak of a command resource)");
  std::string device, command;
  if (!RE2::PartialMatch(re2::StringPiece(s.data(), s.size()), kRe, &device, &command))
    return std::nullopt;
  auto m = mlx5_match(s, kMlx5CommandTimeoutEvent,
                      "MLX5 firmware command " + command + " timed out", device);
  m.extra_info["command"] = kmsg::sanitize_utf8(command);
  return m;
}

// main.c probe_one (init_one before 4.x): the adapter did not come up. 4.x "mlx5_pci_init",
// "mlx5_load_one failed with error code %d" (dev_err), 5.x-6.x "mlx5_pci_init",
// "mlx5_init_one failed with error code %d" (mlx5_core_err).
std::optional<kmsg::Match> match_probe_failed(std::string_view s) {
  static const RE2 kRe(mlx5_message_start(true) +
                       R"((mlx5_init_one|mlx5_load_one|mlx5_pci_init) failed with error code )"
                       R"((-?\d+))");
  std::string device, step;
  int err = 0;
  if (!RE2::PartialMatch(re2::StringPiece(s.data(), s.size()), kRe, &device, &step, &err))
    return std::nullopt;
  auto m =
      mlx5_match(s, kMlx5ProbeFailedEvent,
                 fmt::format("MLX5 adapter failed to initialise: {} error {}", step, err), device);
  m.type = EventType::kCritical;
  m.extra_info["error_code"] = err;
  return m;
}

// main.c: the adapter's firmware never left its (pre-)initializing state, so the adapter does not
// come up (a probe failure follows). 4.x-5.16 mlx5_load_one/mlx5_function_setup and 5.17-6.8
// mlx5_function_enable print, after wait_fw_init gives up, "Firmware over %d MS in pre-initializing
// state, aborting" (then %llu) and "... in initializing state, aborting" (dev_err in 4.x,
// mlx5_core_err after); 6.9+ wait_fw_init prints both itself, "Firmware over %u MS in %s state,
// aborting" ("net/mlx5: Return specific error code for timeout on wait_fw_init", 2024).
std::optional<kmsg::Match> match_firmware_init_timeout(std::string_view s) {
  static const RE2 kRe(mlx5_message_start(true) +
                       R"(Firmware over (\d+) MS in ((?:pre-)?initializing) state, aborting)");
  std::string device, state;
  uint64_t waited_ms = 0;
  if (!RE2::PartialMatch(re2::StringPiece(s.data(), s.size()), kRe, &device, &waited_ms, &state))
    return std::nullopt;
  auto m = mlx5_match(
      s, kMlx5FirmwareInitTimeoutEvent,
      fmt::format("MLX5 firmware stuck in its {} state for {} ms", state, waited_ms), device);
  m.type = EventType::kCritical;
  m.extra_info["waited_ms"] = waited_ms;
  m.extra_info["init_state"] = state;
  return m;
}

// en_main.c mlx5e_tx_timeout (4.x-6.x): netdev_err "TX timeout detected", then per stopped queue
// 4.x "TX timeout on queue: %d, SQ: 0x%x, ..." (en_main.c), 5.1+ the same text from
// en/reporter_tx.c through mlx5e_health_report. netdev_err begins "<driver> <device> <netdev>: "
// (" (unregistered)" and the like after the netdev while it is not registered). Both lines get
// one message, so the queue lines of one timeout are repeats of its first line.
std::optional<kmsg::Match> match_tx_timeout(std::string_view s) {
  static const RE2 kRe(std::string(kmsg::kMessageStart) +
                       R"(mlx5_core(?:\.[a-z]+)? (\S+) (\S+)(?: \([a-z ]+\))?: TX timeout )"
                       R"((?:detected|on queue: (\d+)))");
  std::string device, netdev, queue;
  if (!RE2::PartialMatch(re2::StringPiece(s.data(), s.size()), kRe, &device, &netdev, &queue))
    return std::nullopt;
  auto m = mlx5_match(s, kMlx5TxTimeoutEvent, "MLX5 TX timeout on " + netdev, device);
  m.extra_info["netdev"] = kmsg::sanitize_utf8(netdev);
  if (!queue.empty()) m.extra_info["queue"] = std::stoi(queue);
  return m;
}

// events.c port_module (port.c mlx5_port_module_event before 4.19): "Port module event[error]:
// module %u, %s, %s", the status ("Cable error") and the error (mlx5_pme_error: "Power budget
// exceeded", "Bus stuck (I2C or data shorted)", "Bad or shorted cable/module", ...). "High
// Temperature" is port_module_high_temperature's.
std::optional<kmsg::Match> match_port_module_error(std::string_view s) {
  static const RE2 kRe(mlx5_message_start(true) +
                       R"(Port module event\[error\]: module (\d+), ([^,]+), (.+?)\s*$)");
  std::string device, status, error;
  int module = 0;
  if (!RE2::PartialMatch(re2::StringPiece(s.data(), s.size()), kRe, &device, &module, &status,
                         &error) ||
      error == "High Temperature")
    return std::nullopt;
  auto m = mlx5_match(s, kMlx5PortModuleErrorEvent,
                      fmt::format("MLX5 port module {} error: {}", module, error), device);
  m.extra_info["module"] = module;
  m.extra_info["error"] = kmsg::sanitize_utf8(error);
  return m;
}

}  // namespace

kmsg::ComponentRules infiniband_kernel_log_rules() {
  kmsg::ComponentRules r;
  r.component = "accelerator-nvidia-infiniband";
  r.lines = {
      // mlx5_pcie_event (events.c) through mlx5_core_warn_rl.
      kmsg::pattern_rule({{"insufficient power"}}, "pci_power_insufficient",
                         mlx5_message_start(false) +
                             R"(Detected insufficient power on the PCIe slot \(([0-9]+W)\))",
                         "Insufficient power on MLX5 PCIe slot", "power"),
      // The port module event handler (events.c) through mlx5_core_err: "Port module event[error]:
      // module %u, %s, %s", the status and the error ("High Temperature").
      kmsg::pattern_rule({{"High Temperature", "Temper"}}, "port_module_high_temperature",
                         mlx5_message_start(false) +
                             R"(Port module event\[error\]: module \d+, [^,]+, High Temperature)",
                         "Overheated MLX5 adapter"),
      {{{"ACCESS_REG"}}, match_access_reg},
      {{{"health compromised"}}, match_health_compromised},
      {{{"Fatal error", "l err"}}, match_fatal_error},
      {{{": synd 0x"}, {"Health issue observed", "issue obs"}}, match_syndrome},
      {{{"cause a leak of a command", "leak of a"}}, match_cmd_timeout},
      {{{" failed with error code", "with error"}}, match_probe_failed},
      {{{"initializing state, aborting", "state, abort"}}, match_firmware_init_timeout},
      {{{"TX timeout "}}, match_tx_timeout},
      {{{"Port module event[error]", "event[error]"}}, match_port_module_error},
  };
  return r;
}

KernelLogVerdict evaluate_mlx5_events(const std::vector<Event>& events,
                                      const std::vector<TimePoint>& reboots, TimePoint now) {
  const TimePoint last_reboot =
      reboots.empty() ? TimePoint{} : *std::max_element(reboots.begin(), reboots.end());
  std::vector<const Event*> faults;
  std::map<std::string, std::vector<const Event*>> troubles;  // by name
  for (const Event& e : events) {
    if (e.name == kMlx5HealthCompromisedEvent || e.name == kMlx5FatalErrorEvent ||
        e.name == kMlx5ProbeFailedEvent || e.name == kMlx5FirmwareInitTimeoutEvent) {
      faults.push_back(&e);
    } else if ((e.name == kMlx5CommandTimeoutEvent || e.name == kMlx5TxTimeoutEvent ||
                e.name == kMlx5PortModuleErrorEvent) &&
               e.time > last_reboot && now - e.time <= kMlx5TroubleWindow) {
      troubles[e.name].push_back(&e);
    }
  }
  KernelLogVerdict v;
  // A reboot after a fault's newest event reset the adapter.
  UnresolvedFailures failures = unresolved_failures(faults, reboots);
  if (!failures.reasons.empty()) {
    v.health = Health::kUnhealthy;
    v.reason = "MLX5 adapter failed: " + join(failures.reasons, "; ");
    v.actions = SuggestedActions{
        "an MLX5 adapter's firmware stopped or the adapter did not initialise: a reboot resets it; "
        "inspect the adapter when it fails again after one",
        {aggregate_actions(failures.actions).value_or(RepairAction::kRebootSystem)}};
    return v;
  }
  std::vector<std::string> reasons;
  for (const auto& [name, list] : troubles) {
    const Event* newest = *std::max_element(
        list.begin(), list.end(), [](const Event* a, const Event* b) { return a->time < b->time; });
    reasons.push_back(fmt::format("{} ({}x in 24h)", newest->message, list.size()));
  }
  if (reasons.empty()) return v;
  std::sort(reasons.begin(), reasons.end());
  v.health = Health::kDegraded;
  v.reason = "MLX5 adapter trouble: " + join(reasons, "; ");
  return v;
}

}  // namespace gpud::components

namespace gpud::components {
namespace {

constexpr const char* kComponent = "accelerator-nvidia-infiniband";

bool is_port_change(const Event& e) {
  return e.name == kIbPortDownEvent || e.name == kIbPortUpEvent;
}

std::string port_key_of(const Event& e) {
  const auto& x = e.extra_info;
  return x.is_object() && x.contains("device_port") && x["device_port"].is_string()
             ? x["device_port"].get<std::string>()
             : std::string();
}

std::optional<uint64_t> link_downed_of(const Event& e) {
  const auto& x = e.extra_info;
  if (!x.is_object() || !x.contains("link_downed") || !x["link_downed"].is_number_unsigned())
    return std::nullopt;
  return x["link_downed"].get<uint64_t>();
}

// The newest state change of each port in `history` (newest first).
std::map<std::string, const Event*> latest_changes(const std::vector<Event>& history) {
  std::map<std::string, const Event*> out;
  for (const Event& e : history) {
    if (!is_port_change(e)) continue;
    std::string key = port_key_of(e);
    if (!key.empty()) out.emplace(key, &e);  // the first seen is the newest
  }
  return out;
}

std::string port_label(const host::InfinibandPort& p) {
  return fmt::format("{} port {}", p.device, p.port);
}

std::string state_text(const host::InfinibandPort& p) {
  return fmt::format("{}/{}", p.state.value_or("?"), p.phys_state.value_or("?"));
}

std::string rate_text(double gbps) { return fmt::format("{:g} Gb/s", gbps); }

std::string gpus_text(const NearestGpus& nearest, const std::string& device) {
  auto it = nearest.find(device);
  if (it == nearest.end() || it->second.empty()) return "";
  return fmt::format(", nearest GPU{} {}", it->second.size() > 1 ? "s" : "", join(it->second, " "));
}

nlohmann::json port_info(const host::InfinibandPort& p) {
  nlohmann::json j = {{"device", p.device}, {"port", p.port}, {"device_port", p.device_port()}};
  if (p.state) j["state"] = *p.state;
  if (p.phys_state) j["phys_state"] = *p.phys_state;
  if (auto ld = p.counter("link_downed")) j["link_downed"] = *ld;
  return j;
}

}  // namespace

NearestGpus nearest_gpus(const std::vector<host::InfinibandDevice>& devices,
                         const std::map<std::string, std::vector<std::string>>& gpu_pci_paths) {
  NearestGpus out;
  for (const host::InfinibandDevice& d : devices) {
    size_t best = 0;
    std::vector<std::string> gpus;
    for (const auto& [bus_id, path] : gpu_pci_paths) {
      size_t shared = host::shared_bridges(d.pci_path, path);
      if (shared == 0 || shared < best) continue;
      if (shared > best) gpus.clear(), best = shared;
      gpus.push_back(bus_id);
    }
    if (!gpus.empty()) out[d.name] = std::move(gpus);
  }
  return out;
}

bool port_down(const host::InfinibandPort& p) {
  return (p.state && *p.state == "DOWN") || (p.phys_state && !p.link_up());
}

bool port_up(const host::InfinibandPort& p) { return p.active() && p.link_up(); }

std::vector<Event> port_transitions(const host::InfinibandSnapshot& snapshot,
                                    const std::vector<Event>& history,
                                    const std::set<std::string>& last_up, TimePoint now) {
  std::vector<Event> out;
  const auto latest = latest_changes(history);
  for (const host::InfinibandPort& p : snapshot.ports) {
    if (!p.infiniband()) continue;
    const std::string key = p.device_port();
    auto it = latest.find(key);
    const Event* last = it == latest.end() ? nullptr : it->second;
    const bool was_down = last != nullptr && last->name == kIbPortDownEvent;
    const bool was_up = last != nullptr ? !was_down : last_up.count(key) > 0;
    Event e;
    e.component = kComponent;
    e.time = now;
    e.extra_info = port_info(p);
    if (port_down(p)) {
      const auto before = was_down ? link_downed_of(*last) : std::nullopt;
      const auto downed = p.counter("link_downed");
      const bool again = was_down && before && downed && *downed > *before;
      if (!was_up && !again) continue;
      e.name = kIbPortDownEvent;
      e.type = EventType::kWarning;
      e.message = fmt::format("InfiniBand {} went down ({}){}", port_label(p), state_text(p),
                              again ? " again: link_downed rose while it was down" : "");
      out.push_back(std::move(e));
    } else if (port_up(p) && was_down) {
      const auto down_for = std::chrono::duration_cast<std::chrono::seconds>(now - last->time);
      e.name = kIbPortUpEvent;
      e.type = EventType::kInfo;
      e.message = fmt::format("InfiniBand {} is active again after {} down", port_label(p),
                              format_duration(down_for));
      e.extra_info["down_seconds"] = down_for.count();
      out.push_back(std::move(e));
    }
  }
  return out;
}

CheckResult evaluate_infiniband(const Result<host::InfinibandSnapshot>& snapshot,
                                const std::vector<Event>& history, const NearestGpus& nearest,
                                const InfinibandPolicy& policy, TimePoint now) {
  if (!snapshot)
    return single_state(kComponent, Health::kUnhealthy,
                        "cannot read InfiniBand ports: " + snapshot.error().message, std::nullopt,
                        nullptr, now);
  const host::InfinibandSnapshot& s = *snapshot;
  Health health = Health::kHealthy;
  std::vector<std::string> reasons;
  std::optional<SuggestedActions> actions;
  std::string detail;

  // Port count at the rate.
  int ib_ports = 0, up_at_rate = 0, active = 0, other_layer = 0;
  std::vector<std::string> not_up;
  for (const host::InfinibandPort& p : s.ports) {
    detail +=
        fmt::format("{} ({}): {} {} {}{}\n", port_label(p), p.link_layer.value_or("?"),
                    p.state.value_or("?"), p.phys_state.value_or("?"),
                    p.rate_gbps ? rate_text(*p.rate_gbps) : "rate ?", gpus_text(nearest, p.device));
    if (!p.infiniband()) {
      if (p.link_layer) ++other_layer;
      continue;
    }
    ++ib_ports;
    if (port_up(p)) ++active;
    const bool at_rate = p.rate_gbps && *p.rate_gbps >= policy.at_least_rate_gbps;
    if (p.link_up() && at_rate) {
      ++up_at_rate;
    } else if (policy.expects_ports()) {
      std::string why = state_text(p);
      if (p.link_up() && p.rate_gbps) why += " at " + rate_text(*p.rate_gbps);
      not_up.push_back(port_label(p) + " " + why + gpus_text(nearest, p.device));
    }
  }
  if (policy.expects_ports() && up_at_rate < policy.at_least_ports) {
    health = Health::kUnhealthy;
    std::string r = fmt::format("only {} port(s) are active and >={} Gb/s, expect >={} port(s)",
                                up_at_rate, policy.at_least_rate_gbps, policy.at_least_ports);
    if (!not_up.empty()) r += ": " + join(not_up, "; ");
    reasons.push_back(std::move(r));
  }

  // Drops and flaps from the history of state changes.
  const auto latest = latest_changes(history);
  std::map<std::string, int> cycles;  // device_port -> ib_port_up events
  std::vector<std::string> drops;
  for (const Event& e : history) {
    if (e.name != kIbPortUpEvent) continue;
    const std::string key = port_key_of(e);
    if (key.empty()) continue;
    const auto& x = e.extra_info;
    const auto down_s = x.value("down_seconds", int64_t{0});
    // Only the port's newest return counts, and only while the port is still up.
    if (++cycles[key] == 1 && down_s >= policy.drop_window.count() &&
        now - e.time < policy.drop_sticky && latest.at(key) == &e) {
      drops.push_back(
          fmt::format(
              "{} port {} (down {}, active again {} ago)", x.value("device", key),
              x.value("port", 0), format_duration(std::chrono::seconds(down_s)),
              format_duration(std::chrono::duration_cast<std::chrono::seconds>(now - e.time))) +
          gpus_text(nearest, x.value("device", "")));
    }
  }
  for (const host::InfinibandPort& p : s.ports) {
    if (!p.infiniband() || !port_down(p)) continue;
    auto it = latest.find(p.device_port());
    if (it == latest.end() || it->second->name != kIbPortDownEvent) continue;
    const Event& down = *it->second;
    const auto before = link_downed_of(down);
    const auto downed = p.counter("link_downed");
    if (before && downed && *before != *downed) continue;  // a new down, not yet recorded
    const auto down_for = std::chrono::duration_cast<std::chrono::seconds>(now - down.time);
    if (down_for < policy.drop_window) continue;
    drops.push_back(fmt::format("{} (down {}, {}{})", port_label(p), format_duration(down_for),
                                state_text(p), gpus_text(nearest, p.device)));
  }
  std::vector<std::string> flaps;
  for (const auto& [key, n] : cycles) {
    if (n < policy.flap_cycles) continue;
    std::string device = key.substr(0, key.rfind('_'));
    std::string port = key.substr(key.rfind('_') + 1);
    std::string since;
    if (policy.flap_auto_clear.count() > 0) {
      // GPUd's opt-in window, judged per port: the port is up now and its newest change is its
      // return; a port down, in between or unread keeps the flap reported.
      const Event* newest = latest.at(key);
      const auto up_for = std::chrono::duration_cast<std::chrono::seconds>(now - newest->time);
      const std::string& port_key = key;  // a structured binding is not captured before C++20
      const bool up_now = std::any_of(s.ports.begin(), s.ports.end(), [&](const auto& p) {
        return p.device_port() == port_key && port_up(p);
      });
      if (up_now && newest->name == kIbPortUpEvent) {
        if (up_for >= policy.flap_auto_clear) continue;
        since = fmt::format(", active again {} ago, clears after {}", format_duration(up_for),
                            format_duration(policy.flap_auto_clear));
      }
    }
    flaps.push_back(fmt::format("{} port {} ({} down-active cycles{}{})", device, port, n, since,
                                gpus_text(nearest, device)));
  }
  if (!drops.empty()) reasons.push_back("device(s) down too long: " + join(drops, "; "));
  if (!flaps.empty())
    reasons.push_back("device(s) flapping between ACTIVE<>DOWN: " + join(flaps, "; "));
  if (!drops.empty() || !flaps.empty()) {
    health = Health::kUnhealthy;
    actions = SuggestedActions{
        "an InfiniBand link dropped or flapped: inspect its cable, transceiver and switch port; "
        "set-healthy clears the verdict once repaired",
        {RepairAction::kHardwareInspection}};
  }

  // Values that could not be read.
  std::vector<std::string> unreadable = s.errors;
  for (const host::InfinibandPort& p : s.ports)
    for (const std::string& e : p.errors) unreadable.push_back(port_label(p) + " " + e);
  if (!unreadable.empty()) {
    health = worst(health, Health::kDegraded);
    constexpr size_t kShown = 5;
    std::vector<std::string> shown(unreadable.begin(),
                                   unreadable.begin() + std::min(unreadable.size(), kShown));
    std::string r = "unreadable: " + join(shown, "; ");
    if (unreadable.size() > kShown) r += fmt::format(" (and {} more)", unreadable.size() - kShown);
    reasons.push_back(std::move(r));
  }

  std::string summary;
  if (ib_ports == 0) {
    summary = s.class_dir_present ? "no InfiniBand ports" : "no InfiniBand devices";
  } else if (policy.expects_ports()) {
    summary = fmt::format("{} of {} InfiniBand port(s) LinkUp at >={} Gb/s (expect >={})",
                          up_at_rate, ib_ports, policy.at_least_rate_gbps, policy.at_least_ports);
  } else {
    summary = fmt::format("{} of {} InfiniBand port(s) active (no expected port states set)",
                          active, ib_ports);
  }
  if (other_layer > 0) summary += fmt::format("; {} Ethernet/other port(s) ignored", other_layer);
  std::string reason = health == Health::kHealthy ? summary : join(reasons, "; ");
  CheckResult r = single_state(kComponent, health, reason, actions, nullptr, now);
  r.states[0].extra_info = {{"infiniband_ports", std::to_string(ib_ports)},
                            {"active_ports", std::to_string(active)}};
  r.detail = detail;
  return r;
}

namespace {

using Port = host::InfinibandPort;

// One series per InfiniBand port whose value could be read, labelled with its device_port.
void per_port(const host::InfinibandSnapshot& s, MetricSeries& out,
              std::optional<double> (*read)(const Port&)) {
  for (const Port& p : s.ports)
    if (p.infiniband())
      if (auto v = read(p)) out.emplace_back(Labels{{"device_port", p.device_port()}}, *v);
}

// The port's counters/<name>, times `scale` (4 for the data counters, which count 4-byte words).
template <const char* kCounter, int kScale = 1>
std::optional<double> port_counter(const Port& p) {
  auto v = metric_value(p.counter(kCounter));
  return v ? std::optional<double>(kScale * *v) : std::nullopt;
}

constexpr char kLinkDowned[] = "link_downed";
constexpr char kLinkErrorRecovery[] = "link_error_recovery";
constexpr char kSymbolError[] = "symbol_error";
constexpr char kPortRcvErrors[] = "port_rcv_errors";
constexpr char kPortRcvData[] = "port_rcv_data";
constexpr char kPortXmitData[] = "port_xmit_data";

constexpr SnapshotMetric<host::InfinibandSnapshot> kMetrics[] = {
    {.name = "accelerator_nvidia_infiniband_link_downed",
     .help = "Times the port's link error recovery failed and the link went down (counters/"
             "link_downed)",
     .series = [](const host::InfinibandSnapshot& s,
                  MetricSeries& out) { per_port(s, out, port_counter<kLinkDowned>); }},
    {.name = "accelerator_nvidia_infiniband_link_error_recovery",
     .help = "Successful link error recoveries of the port (counters/link_error_recovery)",
     .series = [](const host::InfinibandSnapshot& s,
                  MetricSeries& out) { per_port(s, out, port_counter<kLinkErrorRecovery>); }},
    {.name = "accelerator_nvidia_infiniband_symbol_error",
     .help = "Minor link errors detected on the port's physical lanes (counters/symbol_error)",
     .series = [](const host::InfinibandSnapshot& s,
                  MetricSeries& out) { per_port(s, out, port_counter<kSymbolError>); }},
    {.name = "accelerator_nvidia_infiniband_port_rcv_errors",
     .help = "Packets with errors received on the port (counters/port_rcv_errors)",
     .series = [](const host::InfinibandSnapshot& s,
                  MetricSeries& out) { per_port(s, out, port_counter<kPortRcvErrors>); }},
    {.name = "accelerator_nvidia_infiniband_port_rcv_bytes",
     .help = "Bytes received on the port (counters/port_rcv_data counts 4-byte words)",
     .series = [](const host::InfinibandSnapshot& s,
                  MetricSeries& out) { per_port(s, out, port_counter<kPortRcvData, 4>); }},
    {.name = "accelerator_nvidia_infiniband_port_xmit_bytes",
     .help = "Bytes sent on the port (counters/port_xmit_data counts 4-byte words)",
     .series = [](const host::InfinibandSnapshot& s,
                  MetricSeries& out) { per_port(s, out, port_counter<kPortXmitData, 4>); }},
    {.name = "accelerator_nvidia_infiniband_port_active",
     .help = "1 when the port's logical state is ACTIVE, else 0",
     .series =
         [](const host::InfinibandSnapshot& s, MetricSeries& out) {
           per_port(s, out, [](const Port& p) {
             return p.state ? metric_value(p.active() ? 1 : 0) : std::nullopt;
           });
         }},
    {.name = "accelerator_nvidia_infiniband_port_link_up",
     .help = "1 when the port's physical state is LinkUp, else 0",
     .series =
         [](const host::InfinibandSnapshot& s, MetricSeries& out) {
           per_port(s, out, [](const Port& p) {
             return p.phys_state ? metric_value(p.link_up() ? 1 : 0) : std::nullopt;
           });
         }},
    {.name = "accelerator_nvidia_infiniband_port_rate_gbps",
     .help = "The port's rate in Gb/s",
     .series =
         [](const host::InfinibandSnapshot& s, MetricSeries& out) {
           per_port(s, out, [](const Port& p) { return p.rate_gbps; });
         }},
    {.name = "accelerator_nvidia_infiniband_hw_counter",
     .help = "The port's driver-specific hw_counters, by counter name",
     .series =
         [](const host::InfinibandSnapshot& s, MetricSeries& out) {
           for (const Port& p : s.ports) {
             if (!p.infiniband()) continue;
             for (const auto& [counter, v] : p.hw_counters)
               out.emplace_back(Labels{{"device_port", p.device_port()}, {"counter", counter}},
                                static_cast<double>(v));
           }
         }},
};
static_assert(valid_metric_table(kMetrics));

}  // namespace

InfinibandComponent::InfinibandComponent(const ComponentContext& ctx)
    : Component(ctx),
      fs_(ctx.config->host_root),
      class_dir_(ctx.config->infiniband_class_root_dir.empty()
                     ? fs_.path("/sys/class/infiniband")
                     : ctx.config->infiniband_class_root_dir) {
  policy_.at_least_ports = ctx.config->infiniband_expected_ports;
  policy_.at_least_rate_gbps = ctx.config->infiniband_expected_rate_gbps;
  policy_.drop_window = ctx.config->infiniband_drop_window;
  policy_.flap_auto_clear = ctx.config->infiniband_flap_auto_clear_window;
  describe_metrics(ctx.metrics, kMetrics);
}

bool InfinibandComponent::supported() const {
  if (nvidia_kernel_log_supported(ctx(), name(), has_events_)) return true;
  auto devices = host::HostFs("/").list(class_dir_);
  return devices && !devices->empty();
}

std::chrono::seconds InfinibandComponent::interval() const {
  return config().infiniband_check_interval;
}

CheckResult InfinibandComponent::check() {
  const TimePoint now = Clock::now();
  auto snapshot = host::read_infiniband(class_dir_, config().infiniband_excluded_devices);
  auto events =
      component_events(ctx(), name(), lookback_start(ctx(), std::chrono::seconds(0), now));
  std::vector<Event> history;
  if (events) history = *events;
  if (snapshot) {
    std::lock_guard lock(mu_);
    // Without its history the component cannot tell a change from a repeat: it records none.
    if (events) {
      auto changes = port_transitions(*snapshot, history, last_up_, now);
      for (const Event& e : changes) record(e);
      history.insert(history.begin(), changes.begin(), changes.end());
    }
    for (const host::InfinibandPort& p : snapshot->ports) {
      if (!p.infiniband()) continue;
      if (port_up(p))
        last_up_.insert(p.device_port());
      else if (port_down(p))
        last_up_.erase(p.device_port());
    }
  }
  std::map<std::string, std::vector<std::string>> gpu_paths;
  if (snapshot && !snapshot->devices.empty())
    for (const std::string& gpu : host::find_nvidia_gpus(fs_))
      gpu_paths[gpu] = host::pci_path_of_device(fs_, gpu);
  CheckResult r = evaluate_infiniband(
      snapshot, history, snapshot ? nearest_gpus(snapshot->devices, gpu_paths) : NearestGpus{},
      policy_, now);
  if (!events) {
    merge_verdict(r, unreadable_history(events.error()));
  } else {
    std::vector<Event> kernel_log;
    for (const Event& e : history)
      if (!is_port_change(e)) kernel_log.push_back(e);
    // A saved log's reboots are not this host's: a scan judges its MLX5 lines without them.
    Result<std::vector<TimePoint>> reboots = std::vector<TimePoint>{};
    if (!ctx().scan_mode)
      reboots = reboot_times(ctx().events, lookback_start(ctx(), std::chrono::seconds(0), now));
    if (!reboots)
      merge_verdict(r, unreadable_history(reboots.error()));
    else if (ctx().scan_mode && !kernel_log.empty())  // judged as of the log's newest event
      merge_verdict(r, evaluate_mlx5_events(kernel_log, *reboots, kernel_log.front().time));
    else
      merge_verdict(r, evaluate_mlx5_events(kernel_log, *reboots, now));
    append_event_summary(r, summary_of(kernel_log));
  }
  publish_metrics(ctx().metrics, name(), kMetrics, snapshot);
  return r;
}

}  // namespace gpud::components
