// Any bytes as a custom plugin specs file (docs/PLUGINS.md), then as a plugin's output read by a
// JSONPath parser: a bad file is an error naming it, odd output a state, never a crash.

#include <cstddef>
#include <cstdint>
#include <string>

#include "plugins/plugin_component.h"
#include "plugins/spec.h"

using namespace gpud;  // NOLINT(google-build-using-namespace)

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  if (auto specs = plugins::parse_specs(text, "/nonexistent/fuzz.yaml"); specs)
    for (const plugins::Spec& s : *specs)
      (void)plugins::to_json(s).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  static const auto parser = [] {
    auto specs = plugins::parse_specs(R"(- plugin_name: fuzz
  plugin_type: component
  health_state_plugin:
    steps: [{name: s, run_bash_script: {script: "true"}}]
    parser:
      json_paths:
        - {query: "$.a.b[0]", field: b, expect: {regex: "^ok$"}}
        - {query: "$.list[*].x", field: xs, suggested_actions: {REBOOT_SYSTEM: {regex: "[1-9]"}}}
        - {query: "$['k k'][-1]", field: k}
)",
                                      "fuzz-parser.yaml");
    return specs->front();
  }();
  plugins::RunOutcome run;
  run.script.exit_code = 0;
  run.script.output = text;
  (void)plugins::evaluate_plugin_run(parser, run, TimePoint{});
  return 0;
}
