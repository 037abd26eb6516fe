// PluginComponent: one custom plugin spec run as a component like any other (its state in
// /v1/states, its gauges <prefix>_health_state_{healthy,unhealthy,degraded}, its health changes as
// events), and evaluate_plugin_run, the pure rule from a run's outcome to its health.
#pragma once

#include <atomic>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "core/component.h"
#include "core/registry.h"
#include "plugins/script_runner.h"
#include "plugins/spec.h"

namespace gpud::plugins {

inline constexpr const char* kComponentType = "custom-plugin";

// What running a spec's steps produced: the steps run in order and stop at the first that fails;
// the output is theirs together (capped as one), the exit code the last step's.
struct RunOutcome {
  ScriptResult script;
  std::string failed_step;  // "" when every step succeeded
};

// Runs the spec's steps within its timeout (shared by all steps).
RunOutcome run_steps(const Spec& spec, ScriptOptions options);

// GPUd's rule: exit code 0 is Healthy ("ok"), anything else (or a timeout) Unhealthy; the parser's
// fields land in extra_info even when the script failed, an `expect` that does not match (or a
// field it expects that is missing) makes the state Unhealthy, and a value matching a
// suggested_actions pattern suggests that action. Output that is not JSON where a parser expects
// it is Unhealthy "failed to parse plugin output".
CheckResult evaluate_plugin_run(const Spec& spec, const RunOutcome& run, TimePoint now);

// The gauges' names for a component: <prefix>_health_state_healthy, ..._unhealthy, ..._degraded.
std::vector<std::string> health_gauge_names(const Spec& spec);

class PluginComponent : public Component {
 public:
  // `script` holds the PATH and bash the scripts run with (tests point them at stand-ins).
  PluginComponent(const ComponentContext& ctx, Spec spec, ScriptOptions script = {});

  std::string_view name() const override { return spec_.component_name; }
  std::vector<std::string> tags() const override;
  // 0 for a manual plugin, an init plugin and an auto plugin without an interval (run once).
  std::chrono::seconds interval() const override;
  bool scheduled() const override;  // false for manual and init plugins
  CheckResult check() override;
  bool can_deregister() const override { return true; }
  void deregistered() override;

  const Spec& spec() const { return spec_; }
  // Kills a run in progress and makes later ones end at once: the daemon is stopping, and its
  // shutdown must not wait for a plugin's timeout.
  void cancel_runs() { cancel_ = true; }

 private:
  void publish(Health health);

  Spec spec_;
  ScriptOptions script_;
  std::atomic<bool> cancel_{false};
  std::mutex mu_;  // guards the gauges against a deregistration landing mid-check
  bool deregistered_ = false;
  std::optional<Health> last_health_;
};

// Registers one PluginComponent per spec, in order; a name another component has is an error
// naming the plugin and where its spec is.
[[nodiscard]] Result<void> register_plugins(Registry& registry, const ComponentContext& ctx,
                                            const std::vector<Spec>& specs,
                                            const ScriptOptions& script = {});
// GET /v1/plugins: the specs of the plugin components registered now, in name order.
nlohmann::json registered_specs(const Registry& registry);

}  // namespace gpud::plugins
