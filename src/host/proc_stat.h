// Parser for /proc/stat: aggregate CPU times, logical core count, and usage between two samples.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "core/result.h"

namespace gpud::host {

// Jiffies spent in each state since boot, from the aggregate "cpu" line. guest/guest_nice are
// already counted in user/nice, so they are not read.
struct CpuTimes {
  uint64_t user = 0;
  uint64_t nice = 0;
  uint64_t system = 0;
  uint64_t idle = 0;
  uint64_t iowait = 0;
  uint64_t irq = 0;
  uint64_t softirq = 0;
  uint64_t steal = 0;

  uint64_t total() const;
  uint64_t idle_all() const { return idle + iowait; }
  bool operator==(const CpuTimes&) const = default;
};

struct ProcStat {
  CpuTimes aggregate;
  int logical_cores = 0;  // number of "cpuN" lines; 0 when the file carries only the aggregate line
};

// Fails when the aggregate "cpu" line is missing or has fewer than four numbers.
[[nodiscard]] Result<ProcStat> parse_proc_stat(std::string_view text);

// Busy percentage between two samples: 100 * (1 - delta(idle+iowait) / delta(total)), in [0, 100].
// nullopt when the samples are equal or the counters went backwards as a whole (reset, e.g. after a
// restore); a single field running backwards (iowait does on some kernels) counts as no change.
std::optional<double> cpu_usage_percent(const CpuTimes& prev, const CpuTimes& cur);

}  // namespace gpud::host
