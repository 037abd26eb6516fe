#include "app/report.h"

#include <algorithm>
#include <sstream>

#include "components/nvidia/nvidia_component.h"
#include "core/json.h"
#include "core/time_util.h"

namespace gpud::app {
namespace {

std::string mark(Health h) { return h == Health::kHealthy ? "✔" : "✘"; }

std::string str(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

std::string pad(const std::string& s, size_t width) {
  return s.size() >= width ? s : s + std::string(width - s.size(), ' ');
}

std::string actions_text(const HealthState& s) {
  if (!s.suggested_actions) return "";
  std::string out;
  for (auto a : s.suggested_actions->repair_actions) {
    if (!out.empty()) out += ", ";
    out += to_string(a);
  }
  if (!s.suggested_actions->description.empty())
    out += (out.empty() ? "" : " (") + s.suggested_actions->description + (out.empty() ? "" : ")");
  return out;
}

}  // namespace

nlohmann::json scan_json(const nlohmann::json& machine_info,
                         const std::vector<ScanEntry>& entries) {
  nlohmann::json comps = nlohmann::json::array();
  for (const auto& e : entries)
    comps.push_back({{"component", e.component},
                     {"states", to_json(e.result.states)},
                     {"events", to_json(e.events)}});
  return {{"machine_info", machine_info}, {"components", comps}};
}

std::string scan_text(const nlohmann::json& mi, const std::vector<ScanEntry>& entries) {
  std::ostringstream out;
  out << "gpud scan of " << str(mi, "hostname") << " (" << str(mi, "osImage") << ", kernel "
      << str(mi, "kernelVersion") << ")\n";
  if (auto cpu = mi.find("cpuInfo"); cpu != mi.end() && cpu->is_object())
    out << "  cpu: " << str(*cpu, "type") << ", " << cpu->value("logicalCores", 0)
        << " logical cores\n";
  if (auto mem = mi.find("memoryInfo"); mem != mi.end() && mem->is_object())
    out << "  memory: " << mem->value("totalBytes", int64_t{0}) / (1024 * 1024) << " MiB\n";
  out << "\n";

  // NVML's own faults (missing, hung, a GPU lost) first: every NVIDIA finding follows from them.
  const ScanEntry* root = nullptr;
  for (const auto& e : entries)
    if (e.component == components::kNvmlFaultOwner && e.result.health() != Health::kHealthy)
      root = &e;
  if (root != nullptr)
    out << "Root cause: " << root->component << ": " << root->result.summary() << "\n\n";

  size_t width = 0;
  for (const auto& e : entries) width = std::max(width, e.component.size());
  int degraded = 0, unhealthy = 0;
  for (const auto& e : entries) {
    Health h = e.result.health();
    if (h == Health::kDegraded) ++degraded;
    if (h == Health::kUnhealthy) ++unhealthy;
    out << mark(h) << " " << pad(e.component, width) << "  " << e.result.summary() << "\n";
  }
  bool header = false;
  std::vector<const ScanEntry*> details;
  if (root != nullptr) details.push_back(root);
  for (const auto& e : entries)
    if (&e != root) details.push_back(&e);
  for (const ScanEntry* entry : details) {
    const ScanEntry& e = *entry;
    if (e.result.health() == Health::kHealthy) continue;
    if (!header) {
      out << "\nDetails of components that are not healthy:\n";
      header = true;
    }
    out << "\n✘ " << e.component << ": " << to_string(e.result.health()) << "\n";
    for (const auto& s : e.result.states) {
      if (s.health == Health::kHealthy) continue;
      out << "  reason: " << s.reason << "\n";
      if (!s.error.empty()) out << "  error: " << s.error << "\n";
      if (auto a = actions_text(s); !a.empty()) out << "  suggested actions: " << a << "\n";
    }
    if (!e.result.detail.empty()) {
      std::istringstream lines(e.result.detail);
      for (std::string line; std::getline(lines, line);) out << "  " << line << "\n";
    }
    for (const auto& ev : e.events)
      out << "  event " << format_rfc3339(ev.time) << " " << to_string(ev.type) << " " << ev.name
          << ": " << ev.message << "\n";
  }
  out << "\n"
      << (degraded + unhealthy == 0 ? "✔" : "✘") << " scan complete: " << entries.size()
      << " components, " << degraded << " degraded, " << unhealthy << " unhealthy\n";
  return out.str();
}

std::string states_text(const nlohmann::json& states) {
  std::ostringstream out;
  size_t width = 0;
  for (const auto& c : states) width = std::max(width, str(c, "component").size());
  for (const auto& c : states) {
    std::string worst = "Healthy";
    std::string reasons;
    if (auto it = c.find("states"); it != c.end() && it->is_array()) {
      for (const auto& s : *it) {
        auto h = parse_health(str(s, "health")).value_or(Health::kUnhealthy);
        if (severity(h) > severity(parse_health(worst).value_or(Health::kHealthy)))
          worst = std::string(to_string(h));
        std::string r = str(s, "reason");
        if (!r.empty()) reasons += (reasons.empty() ? "" : "; ") + r;
      }
    }
    out << (worst == "Healthy" ? "✔" : "✘") << " " << pad(str(c, "component"), width) << "  "
        << pad(worst, 12) << " " << reasons << "\n";
  }
  return out.str();
}

}  // namespace gpud::app
