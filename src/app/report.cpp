#include "app/report.h"

#include <fmt/format.h>

#include <algorithm>
#include <sstream>

#include "components/nvidia/nvidia_component.h"
#include "core/json.h"
#include "core/time_util.h"

namespace gpud::app {
namespace {

// "⊘": Healthy only in that nothing was found, because something kept the component from
// checking (a finding blocked by NVML hung or missing, a GPU lost); never the healthy mark.
constexpr const char* kNotCheckedMark = "⊘";

std::string mark(Health h, bool not_checked) {
  if (h != Health::kHealthy) return "✘";
  return not_checked ? kNotCheckedMark : "✔";
}

bool not_checked(const CheckResult& r) {
  return std::any_of(r.states.begin(), r.states.end(),
                     [](const HealthState& s) { return gpud::not_checked(s); });
}

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

bool time_known(const Event& e) {
  auto it = e.extra_info.find("time_known");
  return it == e.extra_info.end() || !it->is_boolean() || it->get<bool>();
}

std::string boot_offset_text(double seconds) { return fmt::format("boot + {:.2f} s", seconds); }

// "first/last" of one summary row: wall clock when the line gave it, else the boot offset.
std::string seen_text(const std::optional<TimePoint>& wall,
                      const std::optional<int64_t>& offset_us) {
  if (wall) return format_rfc3339(*wall);
  if (offset_us) return boot_offset_text(static_cast<double>(*offset_us) / 1e6);
  return "time unknown";
}

nlohmann::json occurrences_json(const std::vector<kmsg::Occurrences>& occurrences) {
  nlohmann::json out = nlohmann::json::array();
  for (const kmsg::Occurrences& o : occurrences) {
    nlohmann::json j = {{"pci_bus_id", o.pci_bus_id},
                        {"component", o.component},
                        {"kind", o.kind},
                        {"code", o.code},
                        {"count", o.count}};
    if (!o.gpu_uuid.empty()) j["gpu_uuid"] = o.gpu_uuid;
    if (o.first_time) j["first_time"] = format_rfc3339(*o.first_time);
    if (o.last_time) j["last_time"] = format_rfc3339(*o.last_time);
    if (o.first_boot_offset_us)
      j["first_boot_offset_seconds"] = static_cast<double>(*o.first_boot_offset_us) / 1e6;
    if (o.last_boot_offset_us)
      j["last_boot_offset_seconds"] = static_cast<double>(*o.last_boot_offset_us) / 1e6;
    out.push_back(std::move(j));
  }
  return out;
}

void occurrences_text(std::ostringstream& out, const std::vector<kmsg::Occurrences>& occurrences) {
  if (occurrences.empty()) return;
  out << "\nKernel-log Xid/SXid per GPU (every occurrence, repeats included):\n";
  std::string bus;
  for (const kmsg::Occurrences& o : occurrences) {
    if (o.pci_bus_id != bus) {
      bus = o.pci_bus_id;
      out << "  " << bus << (o.gpu_uuid.empty() ? "" : " (" + o.gpu_uuid + ")") << "\n";
    }
    out << "    " << pad(o.kind + " " + std::to_string(o.code), 11) << " " << o.count
        << (o.count == 1 ? " time " : " times") << "  first "
        << seen_text(o.first_time, o.first_boot_offset_us) << ", last "
        << seen_text(o.last_time, o.last_boot_offset_us) << "\n";
  }
}

}  // namespace

std::string event_time_text(const Event& e) {
  if (time_known(e)) return format_rfc3339(e.time);
  auto it = e.extra_info.find("boot_offset_seconds");
  if (it != e.extra_info.end() && it->is_number()) return boot_offset_text(it->get<double>());
  return "time unknown";
}

nlohmann::json scan_json(const nlohmann::json& machine_info, const std::vector<ScanEntry>& entries,
                         const std::vector<kmsg::Occurrences>& occurrences) {
  nlohmann::json comps = nlohmann::json::array();
  for (const auto& e : entries) {
    nlohmann::json events = nlohmann::json::array();
    for (const Event& ev : e.events) {
      nlohmann::json j = to_json(ev);
      if (!time_known(ev)) j.erase("time");  // never the scan's own clock
      events.push_back(std::move(j));
    }
    comps.push_back({{"component", e.component},
                     {"states", to_json(e.result.states)},
                     {"events", std::move(events)}});
  }
  return {{"machine_info", machine_info},
          {"components", comps},
          {"kernel_log_summary", occurrences_json(occurrences)}};
}

std::string scan_text(const nlohmann::json& mi, const std::vector<ScanEntry>& entries,
                      const std::vector<kmsg::Occurrences>& occurrences) {
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
  int degraded = 0, unhealthy = 0, unchecked = 0;
  for (const auto& e : entries) {
    Health h = e.result.health();
    if (h == Health::kDegraded) ++degraded;
    if (h == Health::kUnhealthy) ++unhealthy;
    const bool partly = h == Health::kHealthy && not_checked(e.result);
    if (partly) ++unchecked;
    out << mark(h, partly) << " " << pad(e.component, width) << "  " << e.result.summary() << "\n";
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
      out << "  event " << event_time_text(ev) << " " << to_string(ev.type) << " " << ev.name
          << ": " << ev.message << "\n";
  }
  occurrences_text(out, occurrences);
  out << "\n"
      << (degraded + unhealthy == 0 ? "✔" : "✘") << " scan complete: " << entries.size()
      << " components, " << degraded << " degraded, " << unhealthy << " unhealthy";
  if (unchecked > 0) out << ", " << unchecked << " not (fully) checked (" << kNotCheckedMark << ")";
  out << "\n";
  return out.str();
}

std::string states_text(const nlohmann::json& states) {
  std::ostringstream out;
  size_t width = 0;
  for (const auto& c : states) width = std::max(width, str(c, "component").size());
  for (const auto& c : states) {
    std::string worst = "Healthy";
    std::string reasons;
    bool unchecked = false;
    if (auto it = c.find("states"); it != c.end() && it->is_array()) {
      for (const auto& s : *it) {
        if (auto x = s.find("extra_info");
            x != s.end() && x->is_object() && x->contains("not_checked"))
          unchecked = true;
        auto h = parse_health(str(s, "health")).value_or(Health::kUnhealthy);
        if (severity(h) > severity(parse_health(worst).value_or(Health::kHealthy)))
          worst = std::string(to_string(h));
        std::string r = str(s, "reason");
        if (!r.empty()) reasons += (reasons.empty() ? "" : "; ") + r;
      }
    }
    const Health h = parse_health(worst).value_or(Health::kUnhealthy);
    out << mark(h, unchecked) << " " << pad(str(c, "component"), width) << "  " << pad(worst, 12)
        << " " << reasons << "\n";
  }
  return out.str();
}

}  // namespace gpud::app
