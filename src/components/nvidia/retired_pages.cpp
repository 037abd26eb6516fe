#include "components/nvidia/retired_pages.h"

#include <fmt/format.h>

#include <map>

namespace gpud::components {

namespace {
constexpr const char* kName = "accelerator-nvidia-retired-pages";

std::string uuid_of(const nvml::GpuSnapshot& g) {
  return g.uuid.ok() ? g.uuid.value : std::to_string(g.index);
}

// uuid -> DBE page count of the oldest and newest event in `history`.
struct Range {
  TimePoint oldest_time = TimePoint::max();
  uint32_t oldest = 0;
  TimePoint newest_time = TimePoint::min();
  uint32_t newest = 0;
};
std::map<std::string, Range> dbe_history(const std::vector<Event>& history) {
  std::map<std::string, Range> out;
  for (const auto& e : history) {
    if (e.name != kRetiredPagesDbeEvent) continue;
    auto uuid = e.extra_info.find("gpu_uuid");
    auto dbe = e.extra_info.find("double_bit");
    if (uuid == e.extra_info.end() || dbe == e.extra_info.end() || !uuid->is_string() ||
        !dbe->is_number_unsigned())
      continue;
    Range& r = out[uuid->get<std::string>()];
    uint32_t v = dbe->get<uint32_t>();
    if (e.time < r.oldest_time) r.oldest_time = e.time, r.oldest = v;
    if (e.time >= r.newest_time) r.newest_time = e.time, r.newest = v;
  }
  return out;
}

// Only GPUs that retire pages have these series.
template <uint32_t nvml::RetiredPages::*kPages>
std::optional<double> retired(const nvml::GpuSnapshot& g) {
  if (!catalog::architecture_retires_pages(g.architecture) || !g.retired_pages.ok())
    return std::nullopt;
  return g.retired_pages.value.*kPages;
}

constexpr GpuMetric kMetrics[] = {
    {"accelerator_nvidia_retired_pages_single_bit",
     "Pages retired for multiple single-bit ECC errors", MetricKind::kGauge,
     retired<&nvml::RetiredPages::single_bit>},
    {"accelerator_nvidia_retired_pages_double_bit", "Pages retired for double-bit ECC errors",
     MetricKind::kGauge, retired<&nvml::RetiredPages::double_bit>},
    {"accelerator_nvidia_retired_pages_pending",
     "1 when pages wait for retirement at the next reset", MetricKind::kGauge,
     [](const nvml::GpuSnapshot& g) -> std::optional<double> {
       if (!catalog::architecture_retires_pages(g.architecture) || !g.retired_pages_pending.ok())
         return std::nullopt;
       return g.retired_pages_pending.value ? 1 : 0;
     }},
};

}  // namespace

bool snapshot_retires_pages(const nvml::NvmlSnapshot& snapshot) {
  for (const auto& g : snapshot.gpus)
    if (catalog::architecture_retires_pages(g.architecture) && g.retired_pages.supported())
      return true;
  return false;
}

std::vector<Event> retired_pages_events(const nvml::NvmlSnapshot& snapshot,
                                        const std::vector<Event>& history, TimePoint now) {
  auto known = dbe_history(history);
  std::vector<Event> out;
  for (const auto& g : snapshot.gpus) {
    if (!catalog::architecture_retires_pages(g.architecture) || !g.retired_pages.ok()) continue;
    uint32_t dbe = g.retired_pages.value.double_bit;
    auto it = known.find(uuid_of(g));
    if (it != known.end() && it->second.newest == dbe) continue;
    Event e;
    e.component = kName;
    e.time = std::chrono::time_point_cast<std::chrono::seconds>(now);
    e.name = kRetiredPagesDbeEvent;
    e.type = EventType::kInfo;
    e.message = fmt::format("{}: {} page(s) retired for double-bit errors", uuid_of(g), dbe);
    e.extra_info = {{"gpu_uuid", uuid_of(g)}, {"double_bit", dbe}};
    out.push_back(std::move(e));
  }
  return out;
}

NvidiaVerdict evaluate_retired_pages(const nvml::NvmlSnapshot& snapshot,
                                     const std::vector<Event>& history) {
  auto known = dbe_history(history);
  NvidiaVerdict v;
  v.columns = {"ARCH", "SBE PAGES", "DBE PAGES", "DBE +7d", "PENDING"};
  size_t applicable = 0;
  for (const auto& g : snapshot.gpus) {
    GpuRow& row = v.gpus.emplace_back(g);
    row.data["architecture"] = g.architecture;
    row.cells = {g.architecture};
    if (!catalog::architecture_retires_pages(g.architecture)) {
      row.data["supported"] = false;
      row.cells.resize(v.columns.size(), "n/a");
      continue;
    }
    row.data["supported"] = g.retired_pages.supported();
    if (v.usable(g, g.retired_pages, "retired pages")) {
      ++applicable;
      const nvml::RetiredPages& p = g.retired_pages.value;
      uint32_t growth = 0;
      if (auto it = known.find(uuid_of(g)); it != known.end() && p.double_bit > it->second.oldest)
        growth = p.double_bit - it->second.oldest;
      row.data["single_bit"] = p.single_bit;
      row.data["double_bit"] = p.double_bit;
      row.data["double_bit_growth_7d"] = growth;
      row.cells.insert(row.cells.end(), {std::to_string(p.single_bit), std::to_string(p.double_bit),
                                         std::to_string(growth)});
      if (p.single_bit + p.double_bit >= kMaxRetiredPages)
        v.add(g, Health::kUnhealthy,
              fmt::format("{} has {} retired pages (limit {})", gpu_label(g),
                          p.single_bit + p.double_bit, kMaxRetiredPages),
              RepairAction::kHardwareInspection);
      else if (p.double_bit > kDbeRetiredPagesSoftLimit && growth > 1)
        v.add(g, Health::kUnhealthy,
              fmt::format("{} has {} pages retired for double-bit errors (limit {}), {} new "
                          "in the last 7 days",
                          gpu_label(g), p.double_bit, kDbeRetiredPagesSoftLimit, growth),
              RepairAction::kHardwareInspection);
    } else {
      row.cells.resize(row.cells.size() + 3, unread_text(g.retired_pages));
    }
    if (v.usable(g, g.retired_pages_pending, "retired pages pending status")) {
      row.data["pending"] = g.retired_pages_pending.value;
      row.cells.push_back(g.retired_pages_pending.value ? "yes" : "no");
      if (g.retired_pages_pending.value)
        v.add(g, Health::kUnhealthy, gpu_label(g) + " has pages pending retirement (needs reset)",
              RepairAction::kRebootSystem);
    } else {
      row.cells.push_back(unread_text(g.retired_pages_pending));
    }
  }
  v.healthy_reason =
      applicable == 0
          ? "page retirement not supported (not applicable)"
          : fmt::format("all {} GPU(s) were checked, no retired pages issue found", applicable);
  v.action_description = v.action() == RepairAction::kHardwareInspection
                             ? "retired pages beyond DCGM's limits: the GPU qualifies for RMA"
                             : "pages pending retirement take effect after a GPU reset or reboot";
  return v;
}

RetiredPagesComponent::RetiredPagesComponent(const ComponentContext& ctx)
    : NvidiaComponent(ctx, kMetrics) {}

bool RetiredPagesComponent::supported() const { return supported_when(snapshot_retires_pages); }

CheckResult RetiredPagesComponent::evaluate(const nvml::NvmlSnapshot& snapshot) {
  const TimePoint now = Clock::now();
  learn_support(snapshot_retires_pages(snapshot));
  // Scan has no history: it judges the current counts only and records no baseline.
  if (ctx().scan_mode) return render_verdict(name(), evaluate_retired_pages(snapshot, {}), now);
  std::vector<Event> history;
  if (auto h = events(now - kDbeRetirementWindow, now)) history = unacknowledged(std::move(*h));
  for (auto& e : retired_pages_events(snapshot, history, now)) {
    record(e);
    history.push_back(std::move(e));
  }
  return render_verdict(name(), evaluate_retired_pages(snapshot, history), now);
}

}  // namespace gpud::components
