#include "plugins/plugin_component.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/log.h"
#include "core/strings.h"
#include "core/time_util.h"

namespace gpud::plugins {

RunOutcome run_steps(const Spec& spec, ScriptOptions options) {
  RunOutcome run;
  const auto start = std::chrono::steady_clock::now();
  const size_t cap = options.max_output_bytes;
  run.script.exit_code = 0;
  for (const Step& step : spec.steps) {
    const auto used = std::chrono::duration_cast<std::chrono::milliseconds>(
        std::chrono::steady_clock::now() - start);
    options.timeout = std::max(std::chrono::milliseconds(1), spec.timeout - used);
    options.max_output_bytes = cap - std::min(cap, run.script.output.size());
    options.plugin_name = spec.plugin_name;
    options.plugin_param = spec.param;
    ScriptResult r = run_bash_script(step.script, options);
    run.script.output += r.output;
    run.script.discarded_bytes += r.discarded_bytes;
    run.script.exit_code = r.exit_code;
    run.script.timed_out = r.timed_out;
    run.script.cancelled = r.cancelled;
    run.script.error = r.error;
    if (!r.ok()) {
      run.failed_step = step.name;
      break;
    }
  }
  run.script.duration = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - start);
  return run;
}

namespace {

std::string run_error(const Spec& spec, const RunOutcome& run) {
  const ScriptResult& s = run.script;
  const std::string step = "step \"" + run.failed_step + "\"";
  if (!s.error.empty()) return step + ": " + s.error;
  if (s.timed_out)
    return step + " timed out after " +
           format_duration(std::chrono::duration_cast<std::chrono::seconds>(spec.timeout)) +
           " (its process group was killed)";
  if (s.cancelled)
    return step + " was stopped (the plugin was deregistered, or the daemon is stopping)";
  return step + " exited with code " + std::to_string(s.exit_code);
}

}  // namespace

CheckResult evaluate_plugin_run(const Spec& spec, const RunOutcome& run, TimePoint now) {
  HealthState st;
  st.time = now;
  st.component = spec.component_name;
  st.component_type = kComponentType;
  st.name = spec.plugin_name;
  st.run_mode = spec.run_mode;
  st.raw_output = run.script.output;
  st.health = Health::kHealthy;
  std::vector<std::string> mismatches;
  std::vector<RepairAction> actions;
  std::vector<std::string> action_values;

  // The parser runs even when the script failed: its fields explain the failure.
  if (!spec.json_paths.empty() && !run.script.output.empty()) {
    auto doc = first_json_object(run.script.output);
    if (!doc) {
      st.health = Health::kUnhealthy;
      st.reason = "failed to parse plugin output";
      st.error = doc.error().message;
      if (run.script.discarded_bytes > 0)
        st.error +=
            fmt::format(" (only the first {} bytes of output are kept)", run.script.output.size());
      return CheckResult{{st}, run.script.output};
    }
    if (*doc) {
      for (const JsonPathRule& rule : spec.json_paths) {
        auto value = rule.path.get(**doc);
        if (!value) {
          if (rule.expect)
            mismatches.push_back(
                fmt::format("{} is missing (expected /{}/)", rule.field, rule.expect->text));
          continue;
        }
        const std::string text = value_text(*value);
        st.extra_info[rule.field] = text;
        if (rule.expect && !rule.expect->matches(text))
          mismatches.push_back(
              fmt::format("{}=\"{}\" does not match /{}/", rule.field, text, rule.expect->text));
        for (const auto& [action_name, pat] : rule.suggested_actions) {
          if (!pat.matches(text)) continue;
          auto action = parse_repair_action(action_name);
          if (!action) continue;
          if (std::find(actions.begin(), actions.end(), *action) == actions.end())
            actions.push_back(*action);
          action_values.push_back(rule.field + ": " + text);
        }
      }
    }
  }
  if (!mismatches.empty()) {
    st.health = Health::kUnhealthy;
    st.reason = "unexpected plugin output: " + join(mismatches, "; ");
  }
  if (!run.script.ok()) {
    st.health = Health::kUnhealthy;
    st.error = run_error(spec, run);
    st.reason = st.reason.empty() ? "error executing state plugin: " + st.error
                                  : st.reason + "; " + st.error;
  }
  if (st.health == Health::kHealthy) st.reason = "ok";
  if (!actions.empty()) st.suggested_actions = SuggestedActions{join(action_values, "\n"), actions};
  std::string detail = run.script.output;
  if (run.script.discarded_bytes > 0)
    detail += fmt::format("\n({} more bytes of output discarded)", run.script.discarded_bytes);
  return CheckResult{{st}, detail};
}

std::vector<std::string> health_gauge_names(const Spec& spec) {
  const std::string p = metric_prefix_of(spec.component_name);
  return {p + "_health_state_healthy", p + "_health_state_unhealthy", p + "_health_state_degraded"};
}

PluginComponent::PluginComponent(const ComponentContext& ctx, Spec spec, ScriptOptions script)
    : Component(ctx), spec_(std::move(spec)), script_(std::move(script)) {
  script_.cancel = &cancel_;
  if (ctx.metrics != nullptr) {
    const auto names = health_gauge_names(spec_);
    const char* what[] = {"Healthy", "Unhealthy", "Degraded"};
    for (size_t i = 0; i < names.size(); ++i)
      ctx.metrics->describe(names[i], fmt::format("1 when custom plugin {} is {}, 0 otherwise",
                                                  spec_.plugin_name, what[i]));
  }
}

std::vector<std::string> PluginComponent::tags() const {
  std::vector<std::string> out{spec_.component_name};
  for (const std::string& t : spec_.tags)
    if (std::find(out.begin(), out.end(), t) == out.end()) out.push_back(t);
  return out;
}

std::chrono::seconds PluginComponent::interval() const {
  if (spec_.manual() || spec_.type == PluginType::kInit) return std::chrono::seconds(0);
  return std::chrono::duration_cast<std::chrono::seconds>(spec_.interval);
}

bool PluginComponent::scheduled() const {
  return !spec_.manual() && spec_.type != PluginType::kInit;
}

CheckResult PluginComponent::check() {
  RunOutcome run = run_steps(spec_, script_);
  CheckResult r = evaluate_plugin_run(spec_, run, Clock::now());
  const Health h = r.health();
  std::optional<Health> previous;
  {
    std::lock_guard lock(mu_);
    if (deregistered_) return r;
    previous = last_health_;
    last_health_ = h;
    publish(h);
  }
  // The run history: the first run and every change of health, as events.
  if (!previous || *previous != h) {
    Event e;
    e.time = Clock::now();
    e.name = "plugin_run";
    e.type = h == Health::kHealthy ? EventType::kInfo : EventType::kWarning;
    e.message = fmt::format("{}: {}", to_string(h), r.summary());
    e.extra_info = {{"health", std::string(to_string(h))},
                    {"exit_code", run.script.exit_code},
                    {"duration_ms", run.script.duration.count()}};
    record(std::move(e));
  }
  return r;
}

void PluginComponent::publish(Health h) {
  MetricRegistry* m = ctx().metrics;
  if (m == nullptr) return;
  const auto names = health_gauge_names(spec_);
  m->set(spec_.component_name, names[0], h == Health::kHealthy ? 1 : 0);
  m->set(spec_.component_name, names[1], h == Health::kUnhealthy ? 1 : 0);
  m->set(spec_.component_name, names[2], h == Health::kDegraded ? 1 : 0);
}

void PluginComponent::deregistered() {
  cancel_ = true;  // a script running now is killed
  std::lock_guard lock(mu_);
  deregistered_ = true;
  if (MetricRegistry* m = ctx().metrics; m != nullptr) m->clear_component(spec_.component_name);
  logger("plugins")->info("custom plugin {} deregistered", spec_.component_name);
}

Result<void> register_plugins(Registry& registry, const ComponentContext& ctx,
                              const std::vector<Spec>& specs, const ScriptOptions& script) {
  for (const Spec& spec : specs) {
    if (registry.find(spec.component_name) != nullptr)
      return make_error(spec.source + ": plugin \"" + spec.plugin_name + "\": component name \"" +
                        spec.component_name + "\" is already taken by another component");
    if (auto r = registry.add(std::make_unique<PluginComponent>(ctx, spec, script)); !r)
      return make_error(spec.source + ": plugin \"" + spec.plugin_name +
                        "\": " + r.error().message);
  }
  return {};
}

nlohmann::json registered_specs(const Registry& registry) {
  nlohmann::json out = nlohmann::json::array();
  for (Component* c : registry.all())
    if (const auto* p = dynamic_cast<const PluginComponent*>(c); p != nullptr)
      out.push_back(to_json(p->spec()));
  return out;
}

}  // namespace gpud::plugins
