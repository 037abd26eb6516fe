// MetricHistory: where sampled metric values are kept for /v1/metrics; the SQLite MetricStore
// implements it.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
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
  // One page of the samples with since <= unix_ms <= until, in query()'s order: at most `limit`,
  // after skipping the first `offset`. This default filters query()'s whole answer; the store reads
  // only the page's rows, so that serving a long history takes bounded memory.
  virtual Result<std::vector<MetricSample>> query_page(std::string_view component, TimePoint since,
                                                       TimePoint until, size_t offset,
                                                       size_t limit) const {
    auto all = query(component, since);
    if (!all) return all;
    const int64_t until_ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(until.time_since_epoch()).count();
    std::vector<MetricSample> page;
    size_t skipped = 0;
    for (auto& s : *all) {
      if (s.unix_ms > until_ms) continue;
      if (skipped < offset) {
        ++skipped;
        continue;
      }
      if (page.size() >= limit) break;
      page.push_back(std::move(s));
    }
    return page;
  }
  virtual Result<int> purge(TimePoint before) = 0;
};

}  // namespace gpud
