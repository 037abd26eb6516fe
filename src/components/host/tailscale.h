// TailscaleComponent ("tailscale"): where tailscaled is installed, its service must be active and
// `tailscale status --json` must report the backend Running (GPUd's rules).
#pragma once

#include <chrono>
#include <optional>
#include <string>

#include "components/component.h"
#include "core/cached_answer.h"
#include "host/command.h"
#include "host/host_fs.h"
#include "host/systemctl.h"

namespace gpud::components {

inline constexpr std::chrono::seconds kTailscaleTimeout{10};

struct TailscaleSnapshot {
  // tailscaled.service as systemd reports it; nullopt when systemd does not run the host.
  std::optional<Result<host::UnitState>> service;
  // `tailscale status --json`: the command's output, or why it could not be run.
  Result<host::CommandOutput> status = host::CommandOutput{};
};

// The rule: the service not active ⇒ Unhealthy; `tailscale status --json` failing, exiting
// non-zero, printing no JSON, or a BackendState other than "Running" ⇒ Unhealthy with it; else
// Healthy "tailscale is running".
CheckResult evaluate_tailscale(const TailscaleSnapshot& s);

class TailscaleComponent : public Component {
 public:
  explicit TailscaleComponent(const ComponentContext& ctx);

  std::string_view name() const override { return "tailscale"; }
  // tailscaled installed (found where commands are looked up); looked up again at most once a
  // minute, so installing it later needs no restart.
  bool supported() const override;
  CheckResult check() override;

 private:
  host::HostFs fs_;
  CachedAnswer installed_;
};

}  // namespace gpud::components
