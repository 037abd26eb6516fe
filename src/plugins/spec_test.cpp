#include "plugins/spec.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include "plugins/jsonpath.h"

namespace gpud::plugins {
namespace {

struct TempDir {
  std::string path;
  TempDir() {
    char tmpl[] = "/tmp/gpud-plugins-XXXXXX";
    path = ::mkdtemp(tmpl);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
};

Spec only(const std::string& yaml) {
  auto specs = parse_specs(yaml, "specs.yaml");
  EXPECT_TRUE(specs) << specs.error().message;
  if (!specs) return {};
  EXPECT_EQ(specs->size(), 1u);
  return specs->empty() ? Spec{} : specs->front();
}

std::string error_of(const std::string& yaml) {
  auto specs = parse_specs(yaml, "specs.yaml");
  EXPECT_FALSE(specs) << "parsed: " << yaml;
  return specs ? std::string() : specs.error().message;
}

TEST(PluginSpecs, ComponentPluginWithDefaultsAndGpudsTypeSpelling) {
  Spec s = only(R"(- plugin_name: Mount Check
  type: component
  health_state_plugin:
    steps:
      - name: check
        run_bash_script:
          content_type: plaintext
          script: "mountpoint -q /"
)");
  EXPECT_EQ(s.plugin_name, "Mount Check");
  EXPECT_EQ(s.component_name, "mount-check");
  EXPECT_EQ(s.type, PluginType::kComponent);
  EXPECT_EQ(s.run_mode, "auto");
  EXPECT_EQ(s.timeout, std::chrono::minutes(1));
  EXPECT_EQ(s.interval.count(), 0);
  ASSERT_EQ(s.steps.size(), 1u);
  EXPECT_EQ(s.steps[0].script, "mountpoint -q /");
  EXPECT_EQ(s.source, "specs.yaml:1");
  EXPECT_EQ(metric_prefix_of(s.component_name), "mount_check");
}

TEST(PluginSpecs, InitPluginAndBase64Script) {
  Spec s = only(R"(plugin_name: setup
plugin_type: init
timeout: 10s
health_state_plugin:
  steps:
    - name: s
      run_bash_script: {content_type: base64, script: "ZWNobyBoaQ=="}
)");
  EXPECT_EQ(s.type, PluginType::kInit);
  EXPECT_EQ(s.timeout, std::chrono::seconds(10));
  EXPECT_EQ(s.steps[0].script, "echo hi");
}

TEST(PluginSpecs, ComponentListExpandsEntriesWithRunModeTagsAndParameters) {
  auto specs = parse_specs(R"(- plugin_name: disks
  plugin_type: component_list
  run_mode: auto
  tags: [storage]
  interval: 5m
  component_list:
    - "root:/"
    - "scratch#manual[nightly, disks]:/scratch"
  health_state_plugin:
    steps:
      - name: df
        run_bash_script:
          script: "df ${PAR} # ${NAME}"
)",
                           "specs.yaml");
  ASSERT_TRUE(specs) << specs.error().message;
  ASSERT_EQ(specs->size(), 2u);
  const Spec& root = (*specs)[0];
  EXPECT_EQ(root.component_name, "root");
  EXPECT_EQ(root.run_mode, "auto");
  EXPECT_EQ(root.tags, std::vector<std::string>{"storage"});
  EXPECT_EQ(root.interval, std::chrono::minutes(5));
  // The script stays as written; the entry's parameter travels beside it, for the environment.
  EXPECT_EQ(root.steps[0].script, "df ${PAR} # ${NAME}");
  EXPECT_EQ(root.plugin_name, "root");
  EXPECT_EQ(root.param, "/");
  EXPECT_EQ(root.source, "specs.yaml:7");
  const Spec& scratch = (*specs)[1];
  EXPECT_EQ(scratch.run_mode, "manual");
  EXPECT_EQ(scratch.tags, (std::vector<std::string>{"nightly", "disks"}));
  EXPECT_EQ(scratch.param, "/scratch");
}

TEST(PluginSpecs, ComponentListFileIsReadBesideTheSpecsFile) {
  TempDir dir;
  std::ofstream(dir.path + "/disks.txt") << "# the disks\n\nroot:/\nhome#manual:/home\n";
  std::ofstream(dir.path + "/plugins.yaml") << R"(- plugin_name: disks
  plugin_type: component_list
  component_list_file: disks.txt
  health_state_plugin:
    steps: [{name: df, run_bash_script: {script: "df ${PAR}"}}]
)";
  auto specs = load_specs_file(dir.path + "/plugins.yaml", false);
  ASSERT_TRUE(specs) << specs.error().message;
  ASSERT_EQ(specs->size(), 2u);
  EXPECT_EQ((*specs)[1].component_name, "home");
  EXPECT_EQ((*specs)[1].run_mode, "manual");
  EXPECT_EQ((*specs)[1].steps[0].script, "df ${PAR}");
  EXPECT_EQ((*specs)[1].param, "/home");
  EXPECT_EQ((*specs)[1].source, dir.path + "/disks.txt:4");
}

TEST(PluginSpecs, UnknownFieldNamesThePluginTheFieldAndTheLine) {
  std::string e = error_of(R"(- plugin_name: typo
  plugin_type: component
  health_state_plugin:
    steps:
      - name: s
        run_bash_script:
          scripts: "true"
)");
  EXPECT_NE(e.find("specs.yaml:7"), std::string::npos) << e;
  EXPECT_NE(e.find("plugin \"typo\""), std::string::npos) << e;
  EXPECT_NE(e.find("health_state_plugin.steps[0].run_bash_script.scripts"), std::string::npos) << e;
  EXPECT_NE(e.find("unknown field"), std::string::npos) << e;

  e = error_of("- plugin_name: x\n  plugin_type: component\n  intervall: 1m\n");
  EXPECT_NE(e.find("specs.yaml:3: plugin \"x\": field \"intervall\": unknown field"),
            std::string::npos)
      << e;
}

TEST(PluginSpecs, BadValuesAreErrorsNamingTheField) {
  const std::string steps = R"(
  health_state_plugin:
    steps: [{name: s, run_bash_script: {script: "true"}}]
)";
  auto has = [](const std::string& e, const std::string& part) {
    return e.find(part) != std::string::npos;
  };
  std::string e = error_of("- plugin_name: x\n  plugin_type: job\n" + steps);
  EXPECT_TRUE(has(e, "field \"plugin_type\": \"job\" is not init")) << e;
  e = error_of("- plugin_name: x\n  plugin_type: component\n  interval: 10s\n" + steps);
  EXPECT_TRUE(has(e, "field \"interval\": must be at least 1m")) << e;
  e = error_of("- plugin_name: x\n  plugin_type: component\n  timeout: soon\n" + steps);
  EXPECT_TRUE(has(e, "field \"timeout\": \"soon\" is not a duration")) << e;
  e = error_of("- plugin_name: x\n  plugin_type: component\n  run_mode: sometimes\n" + steps);
  EXPECT_TRUE(has(e, "field \"run_mode\"")) << e;
  e = error_of("- plugin_name: x\n  plugin_type: component\n");
  EXPECT_TRUE(has(e, "plugin \"x\": field \"health_state_plugin\": is required")) << e;
  e = error_of("- plugin_type: component\n" + steps);
  EXPECT_TRUE(has(e, "field \"plugin_name\": is required")) << e;
  e = error_of("- plugin_name: x\n  plugin_type: component\n" + steps +
               "- plugin_name: X\n  plugin_type: component\n" + steps);
  EXPECT_TRUE(has(e, "component name \"x\" is used by another plugin")) << e;
  e = error_of(R"(- plugin_name: x
  plugin_type: component
  health_state_plugin:
    steps: [{name: s, run_bash_script: {content_type: base64, script: "not base64!"}}]
)");
  EXPECT_TRUE(has(e, "run_bash_script.script\": is not valid base64")) << e;
  e = error_of(R"(- plugin_name: x
  plugin_type: component
  health_state_plugin:
    steps: [{name: s, run_bash_script: {script: "true"}}]
    parser:
      json_paths:
        - {query: "$.a", field: a, expect: {regex: "(unclosed"}}
)");
  EXPECT_TRUE(has(e,
                  "specs.yaml:7: plugin \"x\": field "
                  "\"health_state_plugin.parser.json_paths[0].expect.regex\": not a valid"))
      << e;
  e = error_of(R"(- plugin_name: x
  plugin_type: component
  health_state_plugin:
    steps: [{name: s, run_bash_script: {script: "true"}}]
    parser:
      json_paths:
        - {query: "$..a", field: a}
)");
  EXPECT_TRUE(has(e, "json_paths[0].query\": JSONPath \"$..a\": recursive descent")) << e;
  e = error_of(R"(- plugin_name: x
  plugin_type: component
  health_state_plugin:
    steps: [{name: s, run_bash_script: {script: "true"}}]
    parser:
      json_paths:
        - {query: "$.a", field: a, suggested_actions: {REPLACE_GPU: {regex: "x"}}}
)");
  EXPECT_TRUE(has(e, "suggested_actions.REPLACE_GPU\": not a repair action")) << e;
  e = error_of("- [not, a, map]\n");
  EXPECT_TRUE(has(e, "must be a map")) << e;
  e = error_of("- plugin_name: x\n  plugin_type: component\n  tags: {a: b}\n" + steps);
  EXPECT_TRUE(has(e, "field \"tags\": must be a list")) << e;
  e = error_of("- plugin_name: x\n  plugin_type: component\n  bad: [\n");
  EXPECT_TRUE(has(e, "not valid YAML")) << e;
}

TEST(PluginSpecs, BytesThatAreNotUtf8AndHugeListFilesAreErrors) {
  std::string e = error_of("- plugin_name: ok\n- plugin_name: \xff\xfe\n");
  EXPECT_NE(e.find("specs.yaml:2: not valid UTF-8 text"), std::string::npos) << e;
  e = error_of(
      "- plugin_name: x\n  plugin_type: component_list\n  component_list_file: /dev/zero\n"
      "  health_state_plugin: {steps: [{name: s, run_bash_script: {script: 'true'}}]}\n");
  EXPECT_NE(e.find("/dev/zero is larger than 1048576 bytes"), std::string::npos) << e;
  auto accents = parse_specs(
      "- plugin_name: Prüfung\n  plugin_type: component\n"
      "  health_state_plugin: {steps: [{name: s, run_bash_script: "
      "{script: 'echo é'}}]}\n",
      "specs.yaml");
  ASSERT_TRUE(accents) << accents.error().message;
  EXPECT_EQ(accents->front().component_name, "prüfung");
}

// Nested aliases of a few hundred bytes stand for 387 million strings: every walk over the loaded
// graph (a step list, a component list) visits each, so a spec refuses aliases wherever they are,
// before anything is built, as the configuration file does.
TEST(PluginSpecs, AliasesAreRefusedBeforeAnythingIsLoaded) {
  std::string e = error_of(
      "- plugin_name: &name x\n  plugin_type: component\n  tags: [*name]\n"
      "  health_state_plugin: {steps: [{name: s, run_bash_script: {script: 'true'}}]}\n");
  EXPECT_EQ(e, "specs.yaml:3: YAML aliases (*name) are not allowed here; write the value out");
  std::string bomb =
      "- plugin_name: bomb\n  plugin_type: component_list\n  x-a: &a [lol,lol,lol,"
      "lol,lol,lol,lol,lol,lol]\n";
  for (char c = 'b'; c <= 'i'; ++c) {
    bomb += std::string("  x-") + c + ": &" + c + " [";
    for (int i = 0; i < 9; ++i) bomb += (i ? ",*" : "*") + std::string(1, static_cast<char>(c - 1));
    bomb += "]\n";
  }
  bomb +=
      "  component_list: *i\n"
      "  health_state_plugin: {steps: [{name: s, run_bash_script: {script: 'true'}}]}\n";
  ASSERT_LT(bomb.size(), 1000u);
  const auto start = std::chrono::steady_clock::now();
  e = error_of(bomb);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
  EXPECT_EQ(e, "specs.yaml:4: YAML aliases (*name) are not allowed here; write the value out");
  // A file's errors name the file.
  TempDir dir;
  const std::string path = dir.path + "/gpud.plugins.yaml";
  std::ofstream(path) << bomb;
  auto r = load_specs_file(path, false);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message,
            path + ":4: YAML aliases (*name) are not allowed here; write the value out");
}

// A specs file is read up to 4 MiB: a larger one, or one without end (a link to /dev/zero), is
// refused quickly with the file's name, without holding more than the cap.
TEST(PluginSpecs, ALargeOrEndlessSpecsFileIsRefusedAtTheCap) {
  TempDir dir;
  const std::string big = dir.path + "/big.yaml";
  std::ofstream(big) << std::string((size_t{4} << 20) + 1, '#');
  auto r = load_specs_file(big, false);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message, "plugin specs: " + big + " is larger than 4194304 bytes");
  const std::string zero = dir.path + "/zero.yaml";
  ASSERT_EQ(::symlink("/dev/zero", zero.c_str()), 0);
  const auto start = std::chrono::steady_clock::now();
  r = load_specs_file(zero, false);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message, "plugin specs: " + zero + " is larger than 4194304 bytes");
}

TEST(PluginSpecs, MissingDefaultFileMeansNoPluginsMissingNamedFileIsAnError) {
  auto none = load_specs_file("/nonexistent/gpud.plugins.yaml", true);
  ASSERT_TRUE(none) << none.error().message;
  EXPECT_TRUE(none->empty());
  auto named = load_specs_file("/nonexistent/gpud.plugins.yaml", false);
  ASSERT_FALSE(named);
  EXPECT_NE(named.error().message.find("/nonexistent/gpud.plugins.yaml does not exist"),
            std::string::npos);
  auto empty = parse_specs("# nothing yet\n", "specs.yaml");
  ASSERT_TRUE(empty);
  EXPECT_TRUE(empty->empty());
}

TEST(PluginSpecs, ShippedExamplesAreValid) {
  const std::string dir = std::string(GPUD_SOURCE_DIR) + "/deploy/plugins";
  size_t files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".yaml") continue;
    ++files;
    auto specs = load_specs_file(entry.path().string(), false);
    EXPECT_TRUE(specs) << entry.path() << ": " << specs.error().message;
  }
  EXPECT_GE(files, 3u);
}

TEST(PluginJsonPath, KeysIndexesAndWildcards) {
  auto doc = nlohmann::json::parse(
      R"({"a": {"b": 1, "c d": "x"}, "arr": [{"x": 1}, {"x": 2}, {"y": 3}], "t": true})");
  auto get = [&](const std::string& q) {
    auto p = JsonPath::compile(q);
    EXPECT_TRUE(p) << q << ": " << p.error().message;
    return p ? p->get(doc) : std::nullopt;
  };
  EXPECT_EQ(get("$.a.b"), nlohmann::json(1));
  EXPECT_EQ(get("$['a']['c d']"), nlohmann::json("x"));
  EXPECT_EQ(get("$.arr[1].x"), nlohmann::json(2));
  EXPECT_EQ(get("$.arr[-1].y"), nlohmann::json(3));
  EXPECT_EQ(get("$.arr[*].x"), nlohmann::json::array({1, 2}));
  EXPECT_EQ(get("$.t"), nlohmann::json(true));
  EXPECT_FALSE(get("$.a.missing"));
  EXPECT_FALSE(get("$.arr[7]"));
  EXPECT_FALSE(JsonPath::compile("a.b"));
  EXPECT_FALSE(JsonPath::compile("$.arr[?(@.x>1)]"));
  EXPECT_FALSE(JsonPath::compile("$.a["));
  EXPECT_EQ(value_text(nlohmann::json(true)), "true");
  EXPECT_EQ(value_text(nlohmann::json("s")), "s");
  EXPECT_EQ(value_text(nlohmann::json::parse(R"({"k":[1]})")), R"({"k":[1]})");
}

TEST(PluginJsonPath, FirstJsonObjectSkipsTextAroundIt) {
  auto doc = first_json_object("hello {not yet\"}\n");
  EXPECT_FALSE(doc);  // GPUd's rule: the first '{' starts the object
  doc = first_json_object("starting\n{\"msg\": \"a } in a string\", \"n\": {\"m\": 2}}\nbye {}\n");
  ASSERT_TRUE(doc) << doc.error().message;
  ASSERT_TRUE(doc->has_value());
  EXPECT_EQ((**doc)["n"]["m"], 2);
  auto none = first_json_object("no json here\n");
  ASSERT_TRUE(none);
  EXPECT_FALSE(none->has_value());
}

}  // namespace
}  // namespace gpud::plugins
