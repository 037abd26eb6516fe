// SnapshotMetric: a component's metrics declared as data (name, help, kind and a read of the
// snapshot its check collected), the counterpart of the NVIDIA components' GpuMetric for the host
// components, the gpud component and the InfiniBand ports. Each check publishes the whole table
// from its snapshot: a value the read could not produce has no series, and a check whose collection
// failed leaves none, so no code path can keep a metric's last value by forgetting to clear it.
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/metrics.h"
#include "core/result.h"

namespace gpud::components {

// The series of one metric family: each one's labels and value (MetricRegistry::replace_series).
using MetricSeries = std::vector<std::pair<Labels, double>>;

// One metric read from a `Snapshot`. Exactly one of `value` (one series without labels of its own)
// and `series` (every labelled series the snapshot holds: a mount point, a load duration) is set;
// valid_metric_table checks that at compile time.
template <typename Snapshot>
struct SnapshotMetric {
  std::string_view name;
  std::string_view help;
  MetricKind kind = MetricKind::kGauge;
  // nullopt: not read, so no series.
  std::optional<double> (*value)(const Snapshot&) = nullptr;
  // Appends one (labels, value) per series; what it does not append has no series.
  void (*series)(const Snapshot&, MetricSeries& out) = nullptr;
};

// A number as a metric value, and an optional one as an optional value (absent stays absent).
template <typename T>
requires std::is_arithmetic_v<T>
constexpr std::optional<double> metric_value(T v) { return static_cast<double>(v); }
template <typename T>
requires std::is_arithmetic_v<T>
constexpr std::optional<double> metric_value(const std::optional<T>& v) {
  return v ? std::optional<double>(static_cast<double>(*v)) : std::nullopt;
}

// True when every row names itself, says what it is and reads in exactly one way; tables
// static_assert it.
template <typename Snapshot, std::size_t N>
consteval bool valid_metric_table(const SnapshotMetric<Snapshot> (&metrics)[N]) {
  for (const auto& m : metrics)
    if (m.name.empty() || m.help.empty() || (m.value == nullptr) == (m.series == nullptr))
      return false;
  return true;
}

// Declares the table's families (help and kind) once; a null registry declares nothing.
template <typename Snapshot>
void describe_metrics(MetricRegistry* registry, std::span<const SnapshotMetric<Snapshot>> metrics) {
  if (registry == nullptr) return;
  for (const auto& m : metrics) registry->describe(m.name, m.help, m.kind);
}

// Replaces each metric's series of `component` with what `snapshot` gives (a family at a time, so
// a scrape never sees one half written); a null snapshot (the read failed) leaves no series of
// the table at all.
template <typename Snapshot>
void publish_metrics(MetricRegistry* registry, std::string_view component,
                     std::span<const SnapshotMetric<Snapshot>> metrics, const Snapshot* snapshot) {
  if (registry == nullptr) return;
  for (const auto& m : metrics) {
    MetricSeries series;
    if (snapshot != nullptr) {
      if (m.value != nullptr) {
        if (auto v = m.value(*snapshot)) series.emplace_back(Labels{}, *v);
      } else if (m.series != nullptr) {
        m.series(*snapshot, series);
      }
    }
    registry->replace_series(component, m.name, series);
  }
}

// The same over a static table and the check's Result: an error publishes as no snapshot.
template <typename Snapshot, std::size_t N>
void describe_metrics(MetricRegistry* registry, const SnapshotMetric<Snapshot> (&metrics)[N]) {
  describe_metrics(registry, std::span<const SnapshotMetric<Snapshot>>(metrics));
}
template <typename Snapshot, std::size_t N>
void publish_metrics(MetricRegistry* registry, std::string_view component,
                     const SnapshotMetric<Snapshot> (&metrics)[N],
                     const std::type_identity_t<Snapshot>* snapshot) {
  publish_metrics(registry, component, std::span<const SnapshotMetric<Snapshot>>(metrics),
                  snapshot);
}
template <typename Snapshot, std::size_t N>
void publish_metrics(MetricRegistry* registry, std::string_view component,
                     const SnapshotMetric<Snapshot> (&metrics)[N],
                     const Result<Snapshot>& snapshot) {
  publish_metrics(registry, component, metrics, snapshot ? &*snapshot : nullptr);
}

}  // namespace gpud::components
