#include "components/host/tailscale.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <nlohmann/json.hpp>
#include <vector>

#include "core/strings.h"
#include "host/systemd_bus.h"

namespace gpud::components {

CheckResult evaluate_tailscale(const TailscaleSnapshot& s) {
  nlohmann::json data = nlohmann::json::object();
  std::vector<std::string> problems, errors;
  if (s.service) {
    const auto& svc = *s.service;
    if (!svc) {
      problems.push_back("cannot read the tailscaled service");
      errors.push_back(svc.error().message);
    } else if (!svc->error.empty()) {
      problems.push_back("cannot read the tailscaled service");
      errors.push_back(svc->error);
    } else {
      data["service_active_state"] = svc->active_state;
      if (svc->active_state != "active")
        problems.push_back(fmt::format(
            "tailscaled service is {} ({})",
            svc->load_state == "not-found" ? "not-found" : svc->active_state, svc->sub_state));
    }
  }
  std::string backend;
  if (!s.status) {
    problems.push_back("tailscale status failed");
    errors.push_back(s.status.error().message);
  } else {
    const host::CommandOutput& out = *s.status;
    auto j = nlohmann::json::parse(out.out, nullptr, false);
    if (j.is_object() && j.contains("BackendState") && j["BackendState"].is_string()) {
      backend = j["BackendState"].get<std::string>();
      data["backend_state"] = backend;
      if (j.contains("Version") && j["Version"].is_string()) data["version"] = j["Version"];
      if (backend != "Running")
        problems.push_back(fmt::format("tailscale backend state is {}", backend));
    } else {
      std::string err(trim(out.err.empty() ? out.out : out.err));
      problems.push_back(out.exit_code != 0
                             ? fmt::format("tailscale status exited with status {}", out.exit_code)
                             : std::string("tailscale status printed no BackendState"));
      if (!err.empty()) errors.push_back(err.substr(0, 300));
    }
  }
  Health health = problems.empty() ? Health::kHealthy : Health::kUnhealthy;
  std::string reason = problems.empty() ? std::string("tailscale is running")
                                        : fmt::format("{}", fmt::join(problems, "; "));
  CheckResult r = single_state("tailscale", health, reason, std::nullopt, data);
  if (!errors.empty()) r.states[0].error = fmt::format("{}", fmt::join(errors, "; "));
  r.detail = reason + "\n" + (errors.empty() ? "" : fmt::format("{}\n", fmt::join(errors, "\n")));
  return r;
}

TailscaleComponent::TailscaleComponent(const ComponentContext& ctx)
    : Component(ctx), fs_(ctx.config->host_root) {}

bool TailscaleComponent::supported() const {
  return installed_.get([this] {
    return host::find_executable(config().tailscaled_command, config().executable_search_path)
        .has_value();
  });
}

CheckResult TailscaleComponent::check() {
  const auto timeout = std::chrono::duration_cast<std::chrono::milliseconds>(kTailscaleTimeout);
  TailscaleSnapshot s;
  s.service = host::host_unit_state(fs_, config().systemctl_command,
                                    config().executable_search_path, "tailscaled.service", timeout);
  s.status = host::run_command({config().tailscale_command, "status", "--json"},
                               config().executable_search_path, timeout);
  return evaluate_tailscale(s);
}

}  // namespace gpud::components
