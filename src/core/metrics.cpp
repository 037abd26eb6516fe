#include "core/metrics.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace gpud {
namespace {

constexpr char kSep = '\x1f';

// A separator inside a label is replaced, so that keys decode unambiguously (label names are
// [a-zA-Z_][a-zA-Z0-9_]* and never hold '=').
void append_key_part(std::string& k, std::string_view v) {
  for (char c : v) k += c == kSep ? ' ' : c;
}

std::string series_key(std::string_view component, const Labels& labels) {
  std::string k(component);
  for (const auto& [n, v] : labels) {
    k += kSep;
    append_key_part(k, n);
    k += '=';
    append_key_part(k, v);
  }
  return k;
}

std::string_view key_component(std::string_view key) { return key.substr(0, key.find(kSep)); }

// Calls f(name, value) for each label of a key, in name order.
template <typename F>
void for_each_key_label(std::string_view key, F&& f) {
  size_t pos = key.find(kSep);
  while (pos != std::string_view::npos) {
    size_t next = key.find(kSep, pos + 1);
    std::string_view part =
        key.substr(pos + 1, next == std::string_view::npos ? next : next - pos - 1);
    size_t eq = part.find('=');
    f(part.substr(0, eq), eq == std::string_view::npos ? std::string_view() : part.substr(eq + 1));
    pos = next;
  }
}

void append_escaped(std::string& out, std::string_view v) {
  for (char c : v) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '"')
      out += "\\\"";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
}

void append_value(std::string& out, double v) {
  if (std::isnan(v))
    out += "NaN";
  else if (std::isinf(v))
    out += v > 0 ? "+Inf" : "-Inf";
  else {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.17g", v);
    out += buf;
  }
}

}  // namespace

MetricRegistry::Family& MetricRegistry::family(std::string_view name, MetricKind kind) {
  auto it = families_.find(name);
  if (it == families_.end()) {
    it = families_.emplace(std::string(name), Family{}).first;
    it->second.kind = kind;
  }
  return it->second;
}

void MetricRegistry::describe(std::string_view name, std::string_view help, MetricKind kind) {
  std::lock_guard lock(mu_);
  auto& f = family(name, kind);
  f.help = std::string(help);
  f.kind = kind;
}

void MetricRegistry::set(std::string_view component, std::string_view name, double value,
                         const Labels& labels) {
  std::lock_guard lock(mu_);
  family(name, MetricKind::kGauge).series[series_key(component, labels)] = value;
}

void MetricRegistry::add(std::string_view component, std::string_view name, double delta,
                         const Labels& labels) {
  std::lock_guard lock(mu_);
  family(name, MetricKind::kCounter).series[series_key(component, labels)] += delta;
}

void MetricRegistry::clear_component(std::string_view component) {
  std::lock_guard lock(mu_);
  for (auto& [name, f] : families_)
    std::erase_if(f.series, [&](const auto& kv) { return key_component(kv.first) == component; });
}

void MetricRegistry::remove(std::string_view component, std::string_view name,
                            const Labels& labels) {
  std::lock_guard lock(mu_);
  auto it = families_.find(name);
  if (it != families_.end()) it->second.series.erase(series_key(component, labels));
}

void MetricRegistry::clear_series(std::string_view component, std::string_view name) {
  std::lock_guard lock(mu_);
  auto it = families_.find(name);
  if (it == families_.end()) return;
  std::erase_if(it->second.series,
                [&](const auto& kv) { return key_component(kv.first) == component; });
}

void MetricRegistry::replace_series(std::string_view component, std::string_view name,
                                    const std::vector<std::pair<Labels, double>>& series) {
  std::lock_guard lock(mu_);
  auto& f = family(name, MetricKind::kGauge);
  std::erase_if(f.series, [&](const auto& kv) { return key_component(kv.first) == component; });
  for (const auto& [labels, value] : series) f.series[series_key(component, labels)] = value;
}

namespace {

// Appends the family's component series to `out` as samples.
template <typename Series>
void append_samples(int64_t now_ms, const std::string& name, const Series& series,
                    std::vector<MetricSample>& out) {
  for (const auto& [key, value] : series) {
    std::string_view component = key_component(key);
    if (component.empty()) continue;
    MetricSample& s = out.emplace_back();
    s.unix_ms = now_ms;
    s.component = std::string(component);
    s.name = name;
    s.value = value;
    for_each_key_label(key, [&](std::string_view n, std::string_view v) {
      s.labels.emplace(std::string(n), std::string(v));
    });
  }
}

}  // namespace

std::vector<MetricSample> MetricRegistry::snapshot(int64_t now_ms) const {
  std::lock_guard lock(mu_);
  std::vector<MetricSample> out;
  for (const auto& [name, f] : families_) append_samples(now_ms, name, f.series, out);
  return out;
}

void MetricRegistry::snapshot_in_chunks(
    int64_t now_ms, size_t chunk,
    const std::function<void(const std::vector<MetricSample>&)>& take) const {
  std::string last;  // the last family taken; "" before the first
  bool started = false, done = false;
  while (!done) {
    std::vector<MetricSample> out;
    {
      std::lock_guard lock(mu_);
      auto it = started ? families_.upper_bound(last) : families_.begin();
      started = true;
      for (; it != families_.end() && out.size() < std::max<size_t>(chunk, 1); ++it) {
        append_samples(now_ms, it->first, it->second.series, out);
        last = it->first;
      }
      done = it == families_.end();
    }
    if (!out.empty()) take(out);
  }
}

std::string MetricRegistry::prometheus_text() const {
  std::lock_guard lock(mu_);
  std::string out;
  out.reserve(4096);
  for (const auto& [name, f] : families_) {
    if (f.series.empty()) continue;
    out += "# HELP ";
    out += name;
    out += ' ';
    out += f.help.empty() ? name : f.help;
    out += "\n# TYPE ";
    out += name;
    out += f.kind == MetricKind::kCounter ? " counter\n" : " gauge\n";
    for (const auto& [key, value] : f.series) {
      out += name;
      std::string_view component = key_component(key);
      bool first = true;
      auto label = [&](std::string_view ln, std::string_view lv) {
        out += first ? '{' : ',';
        first = false;
        out += ln;
        out += "=\"";
        append_escaped(out, lv);
        out += '"';
      };
      // gpud_component goes in its name order among the others.
      bool component_done = component.empty();
      for_each_key_label(key, [&](std::string_view ln, std::string_view lv) {
        if (!component.empty() && ln == "gpud_component") return;  // the component's wins
        if (!component_done && ln > "gpud_component") {
          label("gpud_component", component);
          component_done = true;
        }
        label(ln, lv);
      });
      if (!component_done) label("gpud_component", component);
      if (!first) out += '}';
      out += ' ';
      append_value(out, value);
      out += '\n';
    }
  }
  return out;
}

size_t MetricRegistry::series_count() const {
  std::lock_guard lock(mu_);
  size_t n = 0;
  for (const auto& [name, f] : families_) n += f.series.size();
  return n;
}

}  // namespace gpud
