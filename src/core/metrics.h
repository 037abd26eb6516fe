// MetricRegistry: the process's Prometheus gauges and counters, written by components, read by
// /metrics and sampled into the metric history every minute.
#pragma once

#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "core/health.h"

namespace gpud {

using Labels = std::map<std::string, std::string>;

enum class MetricKind { kGauge, kCounter };

class MetricRegistry {
 public:
  // Declares a metric family once (help text and kind); set()/add() declare it as a gauge/counter
  // otherwise.
  void describe(std::string_view name, std::string_view help, MetricKind kind = MetricKind::kGauge);

  // Sets a gauge series. A non-empty component adds the label gpud_component=<component>.
  void set(std::string_view component, std::string_view name, double value,
           const Labels& labels = {});
  // Adds to a counter series (created at 0).
  void add(std::string_view component, std::string_view name, double delta,
           const Labels& labels = {});
  // Drops every series of one component (e.g. a mount point that went away is re-set on the next
  // check).
  void clear_component(std::string_view component);
  void clear_series(std::string_view component, std::string_view name);
  // Drops one series (e.g. a deregistered component's row of a scheduler gauge).
  void remove(std::string_view component, std::string_view name, const Labels& labels);
  // Replaces every series of one component's gauge `name` by `series` at once: a series missing
  // from it is gone, and a scrape never sees the family half written.
  void replace_series(std::string_view component, std::string_view name,
                      const std::vector<std::pair<Labels, double>>& series);

  // Component series only (those with gpud_component), stamped with now_ms: what the history
  // stores.
  std::vector<MetricSample> snapshot(int64_t now_ms) const;
  // snapshot()'s samples handed to `take` a few families at a time (at least `chunk` samples, a
  // family never split), in name order, with the registry unlocked while `take` runs: for the
  // history's sample, so that the daemon never holds every series as samples at once (labels as
  // strings in maps: 0.2 MiB with eight GPUs, the largest part of its peak heap). A family
  // added or dropped meanwhile is in a later chunk or gone, like in a later snapshot.
  void snapshot_in_chunks(int64_t now_ms, size_t chunk,
                          const std::function<void(const std::vector<MetricSample>&)>& take) const;
  // Prometheus text exposition format 0.0.4, families sorted by name.
  std::string prometheus_text() const;
  size_t series_count() const;

 private:
  // A series is its key and its value: the key is the component, then '\x1f' + name + '=' + value
  // for each label in name order, which is all a sample needs (component and labels are decoded
  // from it on output). 8 GPUs make about 500 series, so this keeps each to one string.
  struct Family {
    std::string help;
    MetricKind kind = MetricKind::kGauge;
    std::map<std::string, double, std::less<>> series;
  };
  Family& family(std::string_view name, MetricKind kind);

  mutable std::mutex mu_;
  std::map<std::string, Family, std::less<>> families_;
};

}  // namespace gpud
