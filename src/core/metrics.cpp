#include "core/metrics.h"

#include <cmath>
#include <cstdio>

namespace gpud {
namespace {

std::string series_key(std::string_view component, const Labels& labels) {
  std::string k(component);
  for (const auto& [n, v] : labels) {
    k += '\x1f';
    k += n;
    k += '=';
    k += v;
  }
  return k;
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
  auto& f = family(name, MetricKind::kGauge);
  auto& s = f.series[series_key(component, labels)];
  s.component = std::string(component);
  s.name = std::string(name);
  s.labels = labels;
  s.value = value;
}

void MetricRegistry::add(std::string_view component, std::string_view name, double delta,
                         const Labels& labels) {
  std::lock_guard lock(mu_);
  auto& f = family(name, MetricKind::kCounter);
  auto& s = f.series[series_key(component, labels)];
  s.component = std::string(component);
  s.name = std::string(name);
  s.labels = labels;
  s.value += delta;
}

void MetricRegistry::clear_component(std::string_view component) {
  std::lock_guard lock(mu_);
  for (auto& [name, f] : families_)
    std::erase_if(f.series, [&](const auto& kv) { return kv.second.component == component; });
}

void MetricRegistry::clear_series(std::string_view component, std::string_view name) {
  std::lock_guard lock(mu_);
  auto it = families_.find(name);
  if (it == families_.end()) return;
  std::erase_if(it->second.series,
                [&](const auto& kv) { return kv.second.component == component; });
}

std::vector<MetricSample> MetricRegistry::snapshot(int64_t now_ms) const {
  std::lock_guard lock(mu_);
  std::vector<MetricSample> out;
  for (const auto& [name, f] : families_)
    for (const auto& [key, s] : f.series) {
      if (s.component.empty()) continue;
      out.push_back(s);
      out.back().unix_ms = now_ms;
    }
  return out;
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
    for (const auto& [key, s] : f.series) {
      out += name;
      Labels all = s.labels;
      if (!s.component.empty()) all["gpud_component"] = s.component;
      if (!all.empty()) {
        out += '{';
        bool first = true;
        for (const auto& [ln, lv] : all) {
          if (!first) out += ',';
          first = false;
          out += ln;
          out += "=\"";
          append_escaped(out, lv);
          out += '"';
        }
        out += '}';
      }
      out += ' ';
      append_value(out, s.value);
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
