// NetworkLatencyComponent ("network-latency"): TCP connect latency to the configured host:port
// targets (--network-latency-targets), Degraded above --network-latency-threshold. GPUd measures
// Tailscale's DERP relays over the internet instead; see docs/COMPONENTS.md.
#pragma once

#include <chrono>
#include <vector>

#include "components/component.h"
#include "host/tcp_connect.h"

namespace gpud::components {

// How much longer than the threshold a connection may take before it counts as failed.
inline constexpr std::chrono::seconds kNetworkLatencyGrace{5};

// The rule: a target that could not be connected to (not resolved, refused, timed out) ⇒
// Unhealthy naming it and why; a latency above `threshold` ⇒ Degraded naming the target and its
// latency; else Healthy with each target's latency.
CheckResult evaluate_network_latency(const std::vector<host::TcpConnectResult>& results,
                                     std::chrono::milliseconds threshold);

class NetworkLatencyComponent : public Component {
 public:
  explicit NetworkLatencyComponent(const ComponentContext& ctx);

  std::string_view name() const override { return "network-latency"; }
  std::vector<std::string> tags() const override { return {"network", "network-latency"}; }
  // No targets configured: not applicable.
  bool supported() const override { return !targets_.empty(); }
  CheckResult check() override;

 private:
  std::vector<host::TcpTarget> targets_;
};

}  // namespace gpud::components
