#include "plugins/plugin_component.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "core/scheduler.h"

namespace gpud::plugins {
namespace {

using namespace std::chrono_literals;

struct TempDir {
  std::string path;
  TempDir() {
    char tmpl[] = "/tmp/gpud-plugin-XXXXXX";
    path = ::mkdtemp(tmpl);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
};

Spec spec_of(const std::string& yaml) {
  auto specs = parse_specs(yaml, "specs.yaml");
  EXPECT_TRUE(specs) << specs.error().message;
  return specs && !specs->empty() ? specs->front() : Spec{};
}

// GPUd's testdata regex spec: the parser's fields, an expect regex and suggested-action regexes.
const char* kParserSpec = R"(- plugin_name: gpu-diag
  plugin_type: component
  tags: [diag]
  health_state_plugin:
    steps:
      - name: run
        run_bash_script:
          script: "true"
    parser:
      json_paths:
        - {query: $.name, field: name}
        - {query: $.passed, field: passed, expect: {regex: "(?i)^true$"}}
        - query: $.action
          field: action
          suggested_actions:
            REBOOT_SYSTEM: {regex: "(?i).*reboot.*"}
        - query: $.gpus[*].xid
          field: xids
          suggested_actions:
            HARDWARE_INSPECTION: {regex: "79"}
)";

RunOutcome outcome(std::string output, int exit_code = 0) {
  RunOutcome r;
  r.script.output = std::move(output);
  r.script.exit_code = exit_code;
  if (exit_code != 0) r.failed_step = "run";
  return r;
}

TEST(PluginRule, ParserFieldsExpectAndSuggestedActions) {
  const Spec spec = spec_of(kParserSpec);
  auto healthy = evaluate_plugin_run(
      spec, outcome("hello\n{\"name\": \"diag\", \"passed\": true, \"action\": \"none\"}\nbye\n"),
      TimePoint{});
  ASSERT_EQ(healthy.states.size(), 1u);
  const HealthState& h = healthy.states[0];
  EXPECT_EQ(h.health, Health::kHealthy);
  EXPECT_EQ(h.reason, "ok");
  EXPECT_EQ(h.component, "gpu-diag");
  EXPECT_EQ(h.component_type, "custom-plugin");
  EXPECT_EQ(h.run_mode, "auto");
  EXPECT_EQ(h.extra_info.at("name"), "diag");
  EXPECT_EQ(h.extra_info.at("passed"), "true");
  EXPECT_FALSE(h.suggested_actions);
  EXPECT_NE(h.raw_output.find("\"passed\": true"), std::string::npos);

  auto failed = evaluate_plugin_run(
      spec,
      outcome(
          R"({"name": "diag", "passed": false, "action": "please Reboot", "gpus": [{"xid": 79}]})"),
      TimePoint{});
  const HealthState& f = failed.states[0];
  EXPECT_EQ(f.health, Health::kUnhealthy);
  EXPECT_NE(f.reason.find("passed=\"false\" does not match /(?i)^true$/"), std::string::npos)
      << f.reason;
  ASSERT_TRUE(f.suggested_actions);
  EXPECT_EQ(
      f.suggested_actions->repair_actions,
      (std::vector<RepairAction>{RepairAction::kRebootSystem, RepairAction::kHardwareInspection}));
  EXPECT_NE(f.suggested_actions->description.find("action: please Reboot"), std::string::npos);
  EXPECT_EQ(f.extra_info.at("xids"), "[79]");
}

TEST(PluginRule, MissingExpectedFieldAndFailedScriptAreUnhealthy) {
  const Spec spec = spec_of(kParserSpec);
  auto missing = evaluate_plugin_run(spec, outcome(R"({"name": "diag"})"), TimePoint{});
  EXPECT_EQ(missing.health(), Health::kUnhealthy);
  EXPECT_NE(missing.states[0].reason.find("passed is missing"), std::string::npos);

  // The fields still land in extra_info when the script failed.
  auto failed =
      evaluate_plugin_run(spec, outcome(R"({"passed": true, "name": "d"})", 2), TimePoint{});
  EXPECT_EQ(failed.health(), Health::kUnhealthy);
  EXPECT_EQ(failed.states[0].error, "step \"run\" exited with code 2");
  EXPECT_EQ(failed.states[0].extra_info.at("name"), "d");

  auto garbage = evaluate_plugin_run(spec, outcome("{oops"), TimePoint{});
  EXPECT_EQ(garbage.health(), Health::kUnhealthy);
  EXPECT_EQ(garbage.states[0].reason, "failed to parse plugin output");

  RunOutcome timed = outcome("", 137);
  timed.script.timed_out = true;
  auto t = evaluate_plugin_run(spec, timed, TimePoint{});
  EXPECT_NE(t.states[0].error.find("timed out after 1m0s"), std::string::npos) << t.states[0].error;
}

TEST(PluginComponent, EachTypeRunsAndPublishesItsHealthGauges) {
  MetricRegistry metrics;
  ComponentContext ctx;
  ctx.metrics = &metrics;
  auto specs = parse_specs(R"(
- plugin_name: Setup
  plugin_type: init
  health_state_plugin: {steps: [{name: s, run_bash_script: {script: "echo ready"}}]}
- plugin_name: failing
  plugin_type: component
  interval: 2m
  health_state_plugin: {steps: [{name: s, run_bash_script: {script: "echo bad; exit 1"}}]}
- plugin_name: listed
  plugin_type: component_list
  run_mode: manual
  component_list: ["a:0", "b:1"]
  health_state_plugin: {steps: [{name: s, run_bash_script: {script: "exit ${PAR}"}}]}
)",
                           "specs.yaml");
  ASSERT_TRUE(specs) << specs.error().message;
  ASSERT_EQ(specs->size(), 4u);
  Registry registry;
  ASSERT_TRUE(register_plugins(registry, ctx, *specs));
  EXPECT_EQ(registry.names(), (std::vector<std::string>{"a", "b", "failing", "setup"}));

  auto* setup = dynamic_cast<PluginComponent*>(registry.find("setup"));
  ASSERT_NE(setup, nullptr);
  EXPECT_FALSE(setup->scheduled());
  EXPECT_EQ(setup->check().health(), Health::kHealthy);
  auto* failing = registry.find("failing");
  EXPECT_TRUE(failing->scheduled());
  EXPECT_EQ(failing->interval(), std::chrono::minutes(2));
  EXPECT_EQ(failing->check().health(), Health::kUnhealthy);
  auto* a = registry.find("a");
  EXPECT_FALSE(a->scheduled());  // manual
  EXPECT_EQ(a->check().health(), Health::kHealthy);
  EXPECT_EQ(registry.find("b")->check().health(), Health::kUnhealthy);

  const std::string text = metrics.prometheus_text();
  EXPECT_NE(text.find("setup_health_state_healthy{gpud_component=\"setup\"} 1"), std::string::npos)
      << text;
  EXPECT_NE(text.find("failing_health_state_unhealthy{gpud_component=\"failing\"} 1"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("failing_health_state_healthy{gpud_component=\"failing\"} 0"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("failing_health_state_degraded{gpud_component=\"failing\"} 0"),
            std::string::npos)
      << text;

  auto listed = registered_specs(registry);
  ASSERT_EQ(listed.size(), 4u);
  EXPECT_EQ(listed[0]["component_name"], "a");
  EXPECT_EQ(listed[0]["run_mode"], "manual");
  EXPECT_EQ(listed[3]["plugin_type"], "init");
}

// A built-in component for the refusal.
class BuiltIn : public Component {
 public:
  BuiltIn() : Component(ComponentContext{}) {}
  std::string_view name() const override { return "cpu"; }
  CheckResult check() override { return single_state("cpu", Health::kHealthy, "ok"); }
};

// A component_list parameter is data: shell syntax in it is never run, however the script uses it
// (GPUd's ${PAR} or the documented "$GPUD_PLUGIN_PARAM").
TEST(PluginComponent, ListParametersReachTheScriptAsEnvironmentNeverAsShellText) {
  TempDir dir;
  ComponentContext ctx;
  const std::string pwned = dir.path + "/pwned";
  const std::string entry = "evil:$(touch " + pwned + ")`touch " + pwned + "`;touch " + pwned;
  auto specs = parse_specs(R"(
- plugin_name: listed
  plugin_type: component_list
  run_mode: manual
  component_list: [")" + entry +
                               R"("]
  health_state_plugin:
    steps:
      - name: s
        run_bash_script:
          script: |
            echo "quoted=$GPUD_PLUGIN_PARAM"
            echo gpud=${PAR} ${PAR1} ${NAME}
)",
                           "specs.yaml");
  ASSERT_TRUE(specs) << specs.error().message;
  Registry registry;
  ASSERT_TRUE(register_plugins(registry, ctx, *specs));
  CheckResult r = registry.find("evil")->check();
  EXPECT_EQ(r.health(), Health::kHealthy) << r.summary();
  EXPECT_FALSE(std::filesystem::exists(pwned)) << "a parameter ran as shell code";
  const std::string param = entry.substr(entry.find(':') + 1);
  const std::string output = r.states.at(0).raw_output;
  EXPECT_NE(output.find("quoted=" + param + "\n"), std::string::npos) << output;
  EXPECT_NE(output.find("gpud=" + param + " " + param + " evil\n"), std::string::npos) << output;
}

TEST(PluginComponent, DeregisterStopsARunningCheckAndDropsItsState) {
  TempDir dir;
  MetricRegistry metrics;
  ComponentContext ctx;
  ctx.metrics = &metrics;
  const std::string started = dir.path + "/started";
  auto specs = parse_specs(R"(
- plugin_name: slow
  plugin_type: component
  tags: [group]
  timeout: 1m
  health_state_plugin:
    steps: [{name: s, run_bash_script: {script: "echo $$ > )" +
                               started +
                               R"(; sleep 60"}}]
- plugin_name: quick
  plugin_type: component
  run_mode: manual
  health_state_plugin: {steps: [{name: s, run_bash_script: {script: "true"}}]}
)",
                           "specs.yaml");
  ASSERT_TRUE(specs) << specs.error().message;
  Registry registry;
  ASSERT_TRUE(registry.add(std::make_unique<BuiltIn>()));
  ASSERT_TRUE(register_plugins(registry, ctx, *specs));
  Scheduler scheduler(registry, 2, &metrics);
  // The manual plugin is checked once by hand, so it has a cached state and gauges.
  EXPECT_EQ(scheduler.run_now(*registry.find("quick")).health(), Health::kHealthy);
  scheduler.start();
  for (int i = 0; i < 250 && !std::filesystem::exists(started); ++i)
    std::this_thread::sleep_for(20ms);
  ASSERT_TRUE(std::filesystem::exists(started)) << "the slow plugin's check never started";

  auto builtin = scheduler.deregister("cpu");
  ASSERT_FALSE(builtin);
  EXPECT_EQ(builtin.error().code, 400);
  EXPECT_NE(builtin.error().message.find("built in"), std::string::npos);
  auto unknown = scheduler.deregister("nope");
  ASSERT_FALSE(unknown);
  EXPECT_EQ(unknown.error().code, 404);

  Component* slow = registry.find("slow");
  const auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(scheduler.deregister("slow"));
  EXPECT_EQ(registry.find("slow"), nullptr);
  EXPECT_EQ(registry.names(), (std::vector<std::string>{"cpu", "quick"}));
  ASSERT_TRUE(scheduler.deregister("quick"));
  EXPECT_EQ(metrics.prometheus_text().find("quick_health_state"), std::string::npos);
  EXPECT_EQ(metrics.prometheus_text().find("component=\"quick\""), std::string::npos);
  // The running check was cancelled: its script is killed, and the worker comes back at once.
  scheduler.stop();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
  EXPECT_EQ(std::string(slow->name()), "slow");  // retired, still alive for whoever held it
  EXPECT_EQ(metrics.prometheus_text().find("slow_health_state"), std::string::npos);
}

}  // namespace
}  // namespace gpud::plugins
