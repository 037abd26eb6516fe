#include "host/proc_stat.h"

#include <charconv>

#include "host/host_fs.h"

namespace gpud::host {
namespace {

bool parse_u64(std::string_view s, uint64_t& out) {
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && p == s.data() + s.size();
}

bool is_core_label(std::string_view label) {
  if (label.size() <= 3 || label.substr(0, 3) != "cpu") return false;
  for (char c : label.substr(3))
    if (c < '0' || c > '9') return false;
  return true;
}

uint64_t forward_delta(uint64_t prev, uint64_t cur) { return cur > prev ? cur - prev : 0; }

}  // namespace

uint64_t CpuTimes::total() const {
  return user + nice + system + idle + iowait + irq + softirq + steal;
}

Result<ProcStat> parse_proc_stat(std::string_view text) {
  ProcStat out;
  bool have_aggregate = false;
  for (std::string_view line : split_lines(text)) {
    if (line.substr(0, 3) != "cpu") continue;
    auto f = split_fields(line);
    if (f.empty()) continue;
    if (f[0] == "cpu") {
      uint64_t* dst[] = {&out.aggregate.user,    &out.aggregate.nice,   &out.aggregate.system,
                         &out.aggregate.idle,    &out.aggregate.iowait, &out.aggregate.irq,
                         &out.aggregate.softirq, &out.aggregate.steal};
      // Kernels before 2.6 had only four columns; later ones add fields at the end.
      if (f.size() < 5) return make_error("/proc/stat: aggregate cpu line has too few fields");
      for (size_t i = 0; i < std::size(dst) && i + 1 < f.size(); ++i) {
        if (!parse_u64(f[i + 1], *dst[i]))
          return make_error("/proc/stat: bad number \"" + std::string(f[i + 1]) + "\" in cpu line");
      }
      have_aggregate = true;
    } else if (is_core_label(f[0])) {
      ++out.logical_cores;
    }
  }
  if (!have_aggregate) return make_error("/proc/stat: no aggregate cpu line");
  return out;
}

std::optional<double> cpu_usage_percent(const CpuTimes& prev, const CpuTimes& cur) {
  if (cur.total() < prev.total()) return std::nullopt;  // counters reset
  uint64_t idle = forward_delta(prev.idle, cur.idle) + forward_delta(prev.iowait, cur.iowait);
  uint64_t busy = forward_delta(prev.user, cur.user) + forward_delta(prev.nice, cur.nice) +
                  forward_delta(prev.system, cur.system) + forward_delta(prev.irq, cur.irq) +
                  forward_delta(prev.softirq, cur.softirq) + forward_delta(prev.steal, cur.steal);
  uint64_t total = idle + busy;
  if (total == 0) return std::nullopt;
  double pct = 100.0 * (1.0 - static_cast<double>(idle) / static_cast<double>(total));
  if (pct < 0) pct = 0;
  if (pct > 100) pct = 100;
  return pct;
}

}  // namespace gpud::host
