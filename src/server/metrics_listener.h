// MetricsListener: `--metrics-listen-address`, a plain-HTTP listener that serves GET /metrics and
// nothing else, for Prometheus fleets that scrape node_exporter and dcgm-exporter the same way.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "core/metrics.h"
#include "core/result.h"

namespace gpud::server {

class MetricsListener {
 public:
  // `before_metrics`, when set, runs before each /metrics renders (server::Deps::before_metrics).
  explicit MetricsListener(const MetricRegistry& metrics,
                           std::function<void()> before_metrics = nullptr);
  ~MetricsListener();
  MetricsListener(const MetricsListener&) = delete;
  MetricsListener& operator=(const MetricsListener&) = delete;

  // Binds "host:port" (port 0: any free port) and serves on a thread of its own; an error when the
  // address is malformed or taken.
  [[nodiscard]] Result<void> start(const std::string& address);
  void stop();  // bounded; safe to call twice
  int port() const { return port_; }

 private:
  struct Impl;
  const MetricRegistry& metrics_;
  std::function<void()> before_metrics_;
  std::unique_ptr<Impl> impl_;
  int port_ = 0;
};

}  // namespace gpud::server
