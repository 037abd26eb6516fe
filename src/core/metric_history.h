// MetricHistory: where sampled metric values are kept for /v1/metrics; the SQLite MetricStore
// implements it.
#pragma once

#include <string_view>
#include <vector>

#include "core/health.h"
#include "core/result.h"

namespace gpud {

class MetricHistory {
 public:
  virtual ~MetricHistory() = default;
  virtual Result<void> insert(const std::vector<MetricSample>& samples) = 0;
  // Samples of one component (all when empty) with unix_ms >= since, ascending by time, then name.
  virtual Result<std::vector<MetricSample>> query(std::string_view component,
                                                  TimePoint since) const = 0;
  virtual Result<int> purge(TimePoint before) = 0;
};

}  // namespace gpud
