#include "app/npd_check.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <optional>

#include "core/health.h"
#include "core/strings.h"

namespace gpud::app {
namespace {

using nlohmann::json;

constexpr std::string_view kNvidiaPrefix = "accelerator-nvidia-";
constexpr std::array<std::string_view, 10> kKernelComponents = {
    "os", "kernel-module", "cpu", "memory", "disk", "fd", "pci", "fuse", "power-supply", "nfs"};
constexpr std::array<std::string_view, 5> kRuntimeComponents = {"containerd", "docker", "kubelet",
                                                                "library", "systemd"};

std::string string_of(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// The first repair action a state suggests, "" when none.
std::string first_action(const json& state) {
  auto sa = state.find("suggested_actions");
  if (sa == state.end() || !sa->is_object()) return "";
  auto ra = sa->find("repair_actions");
  if (ra == sa->end() || !ra->is_array()) return "";
  for (const json& a : *ra)
    if (a.is_string() && !a.get<std::string>().empty()) return a.get<std::string>();
  return "";
}

// The GPU /v1/gpus blames for `component`: the worst one listing it among its reasons.
struct GpuName {
  long long index = -1;
  std::string pci_bus_id;
};
std::optional<GpuName> gpu_of(const json& gpus, const std::string& component) {
  if (!gpus.is_array()) return std::nullopt;
  std::optional<GpuName> best;
  int best_severity = -1;
  for (const json& g : gpus) {
    if (!g.is_object()) continue;
    auto reasons = g.find("reasons");
    if (reasons == g.end() || !reasons->is_array()) continue;
    for (const json& r : *reasons) {
      if (!r.is_object() || string_of(r, "component") != component) continue;
      auto h = parse_health(string_of(r, "health"));
      if (!h || severity(*h) <= best_severity) continue;
      auto idx = g.find("index");
      if (idx == g.end() || !idx->is_number_integer()) continue;
      best = GpuName{idx->get<long long>(), string_of(g, "pci_bus_id")};
      best_severity = severity(*h);
    }
  }
  return best;
}

}  // namespace

bool NpdSelection::selects(std::string_view component) const {
  if (everything) return true;
  if (std::find(names.begin(), names.end(), component) != names.end()) return true;
  return std::any_of(prefixes.begin(), prefixes.end(),
                     [&](const std::string& p) { return component.substr(0, p.size()) == p; });
}

Result<NpdSelection> parse_npd_selection(std::string_view spec) {
  NpdSelection s;
  s.label = std::string(trim(spec));
  for (std::string_view rest = spec; !rest.empty();) {
    const size_t comma = rest.find(',');
    const std::string item(trim(rest.substr(0, comma)));
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    if (item.empty()) continue;
    if (item == "all") {
      s.everything = true;
    } else if (item == "gpu") {
      s.prefixes.emplace_back(kNvidiaPrefix);
    } else if (item == "kernel") {
      s.names.insert(s.names.end(), kKernelComponents.begin(), kKernelComponents.end());
    } else if (item == "runtime") {
      s.names.insert(s.names.end(), kRuntimeComponents.begin(), kRuntimeComponents.end());
    } else if (std::all_of(item.begin(), item.end(), [](char c) {
                 return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_' ||
                        c == '.';
               })) {
      s.names.push_back(item);
    } else {
      return make_error("--components: \"" + item +
                        "\" is neither a preset (gpu, kernel, runtime, all) nor a component name");
    }
  }
  if (!s.everything && s.names.empty() && s.prefixes.empty())
    return make_error("--components selects nothing; give gpu, kernel, runtime, all or names");
  return s;
}

std::string npd_line(std::string_view s, size_t max_bytes) {
  std::string out(s.substr(0, std::min(s.size(), max_bytes + 1)));
  std::replace(out.begin(), out.end(), '\n', ' ');
  std::replace(out.begin(), out.end(), '\r', ' ');
  out.resize(utf8_prefix(out, max_bytes).size());
  return out;
}

NpdAnswer npd_answer(const json& states, const json& gpus, const NpdSelection& selection) {
  struct Finding {
    std::string component;
    Health health = Health::kHealthy;
    std::string reason, action;
  };
  std::optional<Finding> worst;
  size_t selected = 0, initializing = 0;
  for (const json& c : states) {
    const std::string component = string_of(c, "component");
    if (!selection.selects(component)) continue;
    ++selected;
    for (const json& st : c.at("states")) {
      const Health h = parse_health(string_of(st, "health")).value_or(Health::kUnhealthy);
      if (h == Health::kInitializing) ++initializing;
      if (h == Health::kHealthy || h == Health::kInitializing) continue;
      if (worst && severity(h) <= severity(worst->health)) continue;
      worst = Finding{component, h, string_of(st, "reason"), first_action(st)};
    }
  }
  if (worst && worst->health == Health::kUnhealthy) {
    std::string subject = worst->component;
    if (auto g = gpu_of(gpus, worst->component))
      subject = fmt::format("GPU {} {}", g->index, g->pci_bus_id.empty() ? "" : g->pci_bus_id);
    std::string line =
        fmt::format("{} {}: {}", trim(subject), worst->action.empty() ? "Unhealthy" : worst->action,
                    worst->reason);
    return {kNpdProblem, npd_line(line)};
  }
  if (initializing > 0)
    return {kNpdUnknown, npd_line(fmt::format("gpud {}: {} state(s) still initializing",
                                              selection.label, initializing))};
  if (worst)
    return {kNpdOk, npd_line(fmt::format("{} Degraded: {}", worst->component, worst->reason))};
  if (selected == 0)
    return {kNpdOk,
            npd_line(fmt::format("gpud {}: no such components on this node", selection.label))};
  return {kNpdOk,
          npd_line(fmt::format("gpud {}: {} component(s) Healthy", selection.label, selected))};
}

}  // namespace gpud::app
