// MetricStore: the sampled metric history (one row per series per sample) in SQLite.
#pragma once

#include <optional>

#include "core/metric_history.h"
#include "store/database.h"

namespace gpud::store {

class MetricStore : public MetricHistory {
 public:
  explicit MetricStore(Database& db) : db_(db) {}
  Result<void> insert(const std::vector<MetricSample>& samples) override;  // one transaction
  Result<std::vector<MetricSample>> query(std::string_view component,
                                          TimePoint since) const override;
  Result<std::vector<MetricSample>> query_page(std::string_view component, TimePoint since,
                                               TimePoint until, size_t offset,
                                               size_t limit) const override;  // LIMIT/OFFSET
  Result<int> purge(TimePoint before) override;

 private:
  Result<std::vector<MetricSample>> query_rows(std::string_view component, TimePoint since,
                                               std::optional<TimePoint> until, size_t offset,
                                               size_t limit) const;
  Database& db_;
};

}  // namespace gpud::store
