// End-to-end: custom plugins through `gpud run --plugin-specs-file`: each plugin a component in
// /v1/states, /v1/plugins, /metrics and its events; init plugins gate start-up; the plugin verbs
// (custom-plugins, list-plugins, run-plugin-group, deregister-component) against the daemon.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "tests/e2e/daemon_process.h"

namespace gpud::e2e {
namespace {

const char* kSpecs = R"(
- plugin_name: setup
  plugin_type: init
  health_state_plugin:
    steps: [{name: prepare, run_bash_script: {script: "echo prepared"}}]
- plugin_name: probe
  plugin_type: component
  tags: [site]
  health_state_plugin:
    steps:
      - name: report
        run_bash_script:
          script: |
            echo 'probing'
            echo '{"status": "fine", "temp": 40}'
    parser:
      json_paths:
        - {query: $.status, field: status, expect: {regex: "^fine$"}}
        - {query: $.temp, field: temp}
- plugin_name: group-ok
  plugin_type: component
  run_mode: manual
  tags: [nightly]
  health_state_plugin:
    steps: [{name: mark, run_bash_script: {script: "echo ran"}}]
- plugin_name: group-bad
  plugin_type: component
  run_mode: manual
  tags: [nightly]
  health_state_plugin:
    steps: [{name: fail, run_bash_script: {script: "echo broken; exit 4"}}]
)";

nlohmann::json states_of(const DaemonProcess& d, const std::string& component) {
  auto r = d.get("/v1/states?components=" + component);
  if (!r || r->status != 200) return nullptr;
  auto doc = parse_json(r->body);
  return doc.is_array() && !doc.empty() ? doc[0]["states"] : nullptr;
}

TEST(PluginsE2E, DaemonRunsPluginsAsComponents) {
  TempDirGuard dir{make_temp_dir()};
  const std::string specs = dir.path + "/plugins.yaml";
  std::ofstream(specs) << kSpecs;
  const std::string data = dir.path + "/data";
  DaemonProcess d(data, {"--plugin-specs-file", specs, "--components", "cpu,memory"});
  ASSERT_TRUE(d.ready()) << d.log();
  EXPECT_NE(d.log().find("init plugin setup ran: ok"), std::string::npos) << d.log();

  auto comps = d.get("/v1/components");
  ASSERT_TRUE(comps);
  EXPECT_EQ(parse_json(comps->body),
            nlohmann::json::array({"cpu", "group-bad", "group-ok", "memory", "probe", "setup"}));

  // The auto plugin runs once at start.
  nlohmann::json probe;
  for (int i = 0; i < 100; ++i) {
    probe = states_of(d, "probe");
    if (probe.is_array() && probe[0]["health"] != "Initializing") break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_TRUE(probe.is_array()) << probe;
  EXPECT_EQ(probe[0]["health"], "Healthy") << probe;
  EXPECT_EQ(probe[0]["component_type"], "custom-plugin");
  EXPECT_EQ(probe[0]["run_mode"], "auto");
  EXPECT_EQ(probe[0]["extra_info"]["status"], "fine");
  EXPECT_EQ(probe[0]["extra_info"]["temp"], "40");
  EXPECT_NE(probe[0]["raw_output"].get<std::string>().find("probing"), std::string::npos);
  // The manual ones wait to be asked.
  EXPECT_EQ(states_of(d, "group-ok")[0]["health"], "Initializing");

  auto metrics = d.get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_NE(metrics->body.find("probe_health_state_healthy{gpud_component=\"probe\"} 1"),
            std::string::npos);
  EXPECT_NE(metrics->body.find("setup_health_state_healthy{gpud_component=\"setup\"} 1"),
            std::string::npos);
  auto events = d.get("/v1/events?components=probe&startTime=0");
  ASSERT_TRUE(events);
  EXPECT_NE(events->body.find("plugin_run"), std::string::npos) << events->body;

  auto plugins = d.get("/v1/plugins");
  ASSERT_TRUE(plugins);
  auto list = parse_json(plugins->body);
  ASSERT_TRUE(list.is_array());
  EXPECT_EQ(list.size(), 4u);
  auto listed = run_gpud({"list-plugins", "--data-dir", data});
  EXPECT_EQ(listed.exit_code, 0) << listed.out;
  EXPECT_NE(listed.out.find("- setup (Type: init, Run Mode: auto)"), std::string::npos)
      << listed.out;
  EXPECT_NE(listed.out.find("- group-ok (Type: component, Run Mode: manual)"), std::string::npos)
      << listed.out;

  // trigger-tag runs the group now: both manual plugins, one of them failing.
  auto group = run_gpud({"run-plugin-group", "nightly", "--data-dir", data});
  EXPECT_EQ(group.exit_code, 1) << group.out;
  EXPECT_NE(group.out.find("group-bad"), std::string::npos) << group.out;
  EXPECT_NE(group.out.find("not all Healthy"), std::string::npos) << group.out;
  EXPECT_EQ(states_of(d, "group-ok")[0]["health"], "Healthy");
  auto bad = states_of(d, "group-bad");
  EXPECT_EQ(bad[0]["health"], "Unhealthy");
  EXPECT_EQ(bad[0]["error"], "step \"fail\" exited with code 4");
  EXPECT_EQ(run_gpud({"run-plugin-group", "site", "--data-dir", data}).exit_code, 0);

  // DELETE: a plugin goes, a built-in refuses.
  auto builtin = run_gpud({"deregister-component", "cpu", "--data-dir", data});
  EXPECT_EQ(builtin.exit_code, 2) << builtin.out;
  EXPECT_NE(builtin.out.find("HTTP 400"), std::string::npos) << builtin.out;
  EXPECT_NE(builtin.out.find("built in"), std::string::npos) << builtin.out;
  auto gone = run_gpud({"deregister-component", "group-bad", "--data-dir", data});
  EXPECT_EQ(gone.exit_code, 0) << gone.out;
  comps = d.get("/v1/components");
  ASSERT_TRUE(comps);
  EXPECT_EQ(parse_json(comps->body),
            nlohmann::json::array({"cpu", "group-ok", "memory", "probe", "setup"}));
  auto after = d.get("/v1/states?components=group-bad");
  ASSERT_TRUE(after);
  EXPECT_EQ(after->status, 404);
  metrics = d.get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_EQ(metrics->body.find("group_bad_health_state"), std::string::npos);
  EXPECT_EQ(metrics->body.find("component=\"group-bad\""), std::string::npos);
  EXPECT_EQ(run_gpud({"run-plugin-group", "nightly", "--data-dir", data}).exit_code, 0);
  auto again = run_gpud({"deregister-component", "group-bad", "--data-dir", data});
  EXPECT_NE(again.out.find("HTTP 404"), std::string::npos) << again.out;
  EXPECT_EQ(d.stop(), 0) << d.log();
}

TEST(PluginsE2E, FailingInitPluginKeepsTheDaemonFromBecomingReady) {
  TempDirGuard dir{make_temp_dir()};
  const std::string specs = dir.path + "/plugins.yaml";
  std::ofstream(specs) << R"(- plugin_name: driver-setup
  plugin_type: init
  health_state_plugin:
    steps: [{name: load module, run_bash_script: {script: "echo 'modprobe: FATAL'; exit 3"}}]
)";
  auto r = run_gpud({"run", "--listen-address", "127.0.0.1:" + std::to_string(free_port()),
                     "--data-dir", dir.path + "/data", "--plugin-specs-file", specs},
                    60);
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find("init plugin driver-setup is Unhealthy"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("step \"load module\" exited with code 3"), std::string::npos) << r.out;
}

TEST(PluginsE2E, ShutdownDoesNotWaitForARunningPlugin) {
  TempDirGuard dir{make_temp_dir()};
  const std::string specs = dir.path + "/plugins.yaml";
  const std::string started = dir.path + "/started";
  std::ofstream(specs) << "- plugin_name: long\n  plugin_type: component\n  timeout: 2m\n"
                          "  health_state_plugin:\n    steps: [{name: s, run_bash_script: {script: "
                          "\"touch "
                       << started << "; sleep 100\"}}]\n";
  DaemonProcess d(dir.path + "/data", {"--plugin-specs-file", specs, "--components", "cpu"});
  ASSERT_TRUE(d.ready()) << d.log();
  for (int i = 0; i < 200 && !std::filesystem::exists(started); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  ASSERT_TRUE(std::filesystem::exists(started)) << d.log();
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(d.stop(SIGTERM, 5000), 0) << d.log();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

TEST(PluginsE2E, SpecsFileFromTheConfigFileAndItsErrors) {
  TempDirGuard dir{make_temp_dir()};
  const std::string specs = dir.path + "/plugins.yaml";
  std::ofstream(specs) << "- plugin_name: typo\n  plugin_type: component\n  timeoutt: 1m\n";
  const std::string config = dir.path + "/gpud.yaml";
  std::ofstream(config) << "plugin-specs-file: " << specs << "\n";
  auto r = run_gpud({"run", "--config", config, "--listen-address",
                     "127.0.0.1:" + std::to_string(free_port()), "--data-dir", dir.path + "/data"});
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find(specs + ":3: plugin \"typo\": field \"timeoutt\": unknown field"),
            std::string::npos)
      << r.out;
  auto missing =
      run_gpud({"run", "--plugin-specs-file", dir.path + "/absent.yaml", "--listen-address",
                "127.0.0.1:" + std::to_string(free_port()), "--data-dir", dir.path + "/data"});
  EXPECT_EQ(missing.exit_code, 1) << missing.out;
  EXPECT_NE(missing.out.find("absent.yaml does not exist"), std::string::npos) << missing.out;
}

TEST(PluginsE2E, CustomPluginsVerbValidatesAndRuns) {
  TempDirGuard dir{make_temp_dir()};
  const std::string specs = dir.path + "/plugins.yaml";
  std::ofstream(specs) << kSpecs;
  auto check = run_gpud({"custom-plugins", specs});
  EXPECT_EQ(check.exit_code, 0) << check.out;
  EXPECT_NE(check.out.find("4 plugin specs in " + specs + " valid"), std::string::npos)
      << check.out;
  auto run = run_gpud({"custom-plugins", "--run", "--fail-fast=false", specs});
  EXPECT_EQ(run.exit_code, 1) << run.out;  // group-bad fails
  EXPECT_NE(run.out.find("✔ setup: Healthy: ok"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("extra_info.status: fine"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("✘ group-bad: Unhealthy"), std::string::npos) << run.out;
  const std::string examples = std::string(GPUD_SOURCE_DIR) + "/deploy/plugins/mount-check.yaml";
  auto mount = run_gpud({"cs", "--run", examples});
  EXPECT_EQ(mount.exit_code, 0) << mount.out;
  EXPECT_NE(mount.out.find("extra_info.mounted: true"), std::string::npos) << mount.out;

  std::ofstream(specs) << "- plugin_name: x\n  plugin_type: component\n  health_state_plugin:\n"
                          "    steps: [{name: s, run_bash_script: {script: 'true', shell: zsh}}]\n";
  auto bad = run_gpud({"custom-plugins", specs});
  EXPECT_EQ(bad.exit_code, 2) << bad.out;
  EXPECT_NE(bad.out.find("field \"health_state_plugin.steps[0].run_bash_script.shell\": unknown"),
            std::string::npos)
      << bad.out;
}

}  // namespace
}  // namespace gpud::e2e
