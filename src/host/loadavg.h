// Parser for /proc/loadavg: the 1, 5 and 15 minute load averages and the task counts.
#pragma once

#include <cstdint>
#include <string_view>

#include "core/result.h"

namespace gpud::host {

struct LoadAvg {
  double one = 0;
  double five = 0;
  double fifteen = 0;
  int64_t runnable = 0;  // "4/102": currently runnable scheduling entities
  int64_t tasks = 0;     // ... and how many exist
};

// Needs the three averages; the "runnable/tasks" field is optional (left 0 when absent or odd).
[[nodiscard]] Result<LoadAvg> parse_loadavg(std::string_view text);

}  // namespace gpud::host
