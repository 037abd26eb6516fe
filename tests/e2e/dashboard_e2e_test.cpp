// End-to-end: every query of the Grafana dashboard (deploy/grafana/gpud-fleet.json) runs against a
// live Prometheus that scrapes gpud (fake NVML, eight GPUs, an Xid 79 in its kernel log) with the
// shipped rules: each panel query and each template-variable query must parse and return series,
// and the fleet panels must count what this node has. A second test reads each node's panels for a
// healthy node, a lost GPU and a hung driver.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <regex>
#include <thread>

#include "tests/e2e/daemon_process.h"
#include "tests/e2e/prometheus_stack.h"

namespace gpud::e2e {
namespace {

using namespace std::chrono_literals;
using Json = nlohmann::json;

constexpr const char* kPrometheus = "/usr/bin/prometheus";

struct PanelQuery {
  std::string panel;
  std::string legend;
  std::string expr;
};

// Every target of every panel, rows' nested panels included.
void collect_queries(const Json& panels, std::vector<PanelQuery>& out) {
  for (const Json& p : panels) {
    if (p.contains("panels")) collect_queries(p["panels"], out);
    if (!p.contains("targets")) continue;
    for (const Json& t : p["targets"])
      out.push_back({p.value("title", ""), t.value("legendFormat", ""), t.value("expr", "")});
  }
}

// Grafana's variables: the nodes `node` selects (".*": the whole fleet), a rate window of a minute.
std::string substitute_variables(std::string expr, const std::string& node = ".*") {
  expr = std::regex_replace(expr, std::regex("\\$__rate_interval"), "1m");
  expr = std::regex_replace(expr, std::regex("\\$node\\b"), node);
  return expr;
}

std::vector<PanelQuery> dashboard_queries() {
  std::ifstream in(std::string(GPUD_SOURCE_DIR) + "/deploy/grafana/gpud-fleet.json");
  const Json dashboard = Json::parse(in, nullptr, false);
  std::vector<PanelQuery> queries;
  if (dashboard.is_object()) collect_queries(dashboard["panels"], queries);
  return queries;
}

TEST(DashboardE2E, EveryPanelQueryParsesAndReturnsSeries) {
  if (!std::filesystem::exists(kPrometheus))
    GTEST_SKIP() << kPrometheus
                 << " not installed (scripts/install-deps.sh installs Debian's prometheus)";
  const std::string source_dir = GPUD_SOURCE_DIR;
  std::ifstream in(source_dir + "/deploy/grafana/gpud-fleet.json");
  const Json dashboard = Json::parse(in, nullptr, false);
  ASSERT_TRUE(dashboard.is_object()) << "deploy/grafana/gpud-fleet.json does not parse";
  std::vector<PanelQuery> queries;
  collect_queries(dashboard["panels"], queries);
  ASSERT_GE(queries.size(), 10u);

  const std::string dir = make_temp_dir();
  ASSERT_FALSE(dir.empty());
  TempDirGuard remove_dir{dir};  // declared first: runs after the processes are gone
  const std::string kmsg = dir + "/kmsg";
  { std::ofstream(kmsg).flush(); }
  DaemonProcess gpud(
      dir + "/data", {"--nvml-lib", GPUD_FAKE_NVML}, true,
      {"FAKE_NVML_SCENARIO=" + source_dir + "/testing/fixtures/nvml/h100x8-healthy.json",
       "GPUD_KMSG_PATH=" + kmsg});
  ASSERT_TRUE(gpud.ready()) << gpud.log();

  const int prom_port = free_port();
  std::ofstream(dir + "/prometheus.yml")
      << one_gpud_prometheus_config({source_dir + "/deploy/prometheus/gpud-alerts.yml",
                                     source_dir + "/deploy/prometheus/dcgm-compat-rules.yml"},
                                    dir + "/data", gpud.port(), "node-1");
  ChildProcess prometheus(prometheus_command(kPrometheus, dir, prom_port), dir + "/prometheus.log");
  PrometheusApi api(prom_port);
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  ASSERT_TRUE(wait_until(deadline, [&] {
    return !prometheus.running() || api.query("up{job=\"gpud\",node=\"node-1\"} == 1").size() == 1;
  })) << read_file(dir + "/prometheus.log");
  ASSERT_TRUE(prometheus.running()) << read_file(dir + "/prometheus.log");

  // An Xid 79 on GPU 0, so the error panels have something to show; then enough scrapes of it
  // for a rate.
  Json gpu0 = api.query("accelerator_nvidia_temperature_current_celsius{gpu=\"0\"}");
  ASSERT_EQ(gpu0.size(), 1u) << gpu0.dump();
  std::ofstream(kmsg, std::ios::app)
      << xid_kmsg_record(1, gpu0[0]["metric"].value("pci_bus_id", ""), 79);
  ASSERT_TRUE(wait_until(deadline, [&] {
    return api.query("count_over_time(accelerator_nvidia_xid_errors_total[1m]) >= 3").size() == 1 &&
           api.query("gpud_component_suggested_action{action=\"REBOOT_SYSTEM\"} == 1").size() == 1;
  })) << gpud.log();

  // Every panel query parses and returns series.
  std::map<std::string, Json> results;  // by panel title and legend
  for (const PanelQuery& q : queries) {
    const std::string expr = substitute_variables(q.expr);
    ASSERT_EQ(expr.find('$'), std::string::npos)
        << q.panel << ": a variable this test does not know: " << q.expr;
    Json answer = api.query_answer(expr);
    ASSERT_TRUE(answer.is_object()) << q.panel << ": Prometheus did not answer";
    EXPECT_EQ(answer.value("status", ""), "success") << q.panel << ": " << expr << "\n"
                                                     << answer.dump();
    const Json result = answer.value("data", Json::object()).value("result", Json::array());
    EXPECT_FALSE(result.empty()) << q.panel << " (" << q.legend << ") returns no series: " << expr;
    results[q.panel + "/" + q.legend] = result;
  }

  // Every template variable's label_values(<series>, <label>) finds this node.
  for (const Json& v : dashboard["templating"]["list"]) {
    if (v.value("type", "") != "query") continue;
    std::smatch m;
    const std::string definition = v.value("definition", "");
    ASSERT_TRUE(std::regex_match(definition, m,
                                 std::regex("label_values\\((.*), *([a-zA-Z_][a-zA-Z0-9_]*)\\)")))
        << definition;
    Json values = api.query("count by (" + m[2].str() + ") (" + m[1].str() + ")");
    ASSERT_EQ(values.size(), 1u) << definition << ": " << values.dump();
    EXPECT_EQ(values[0]["metric"].value(m[2].str(), ""), "node-1") << definition;
  }

  // The fleet panels count this node: one node up, its 8 GPUs, GPU 0 Unhealthy with the Xid.
  auto single = [&](const std::string& key) {
    const Json& r = results[key];
    return r.size() == 1 ? value_of(r[0]) : -1.0;
  };
  EXPECT_EQ(single("Nodes reporting/"), 1);
  EXPECT_EQ(single("gpud down/"), 0);
  EXPECT_EQ(single("Unhealthy nodes/"), 1);
  EXPECT_EQ(single("Unhealthy components/"), 1);
  EXPECT_EQ(single("GPUs/"), 8);
  // One bad GPU of eight: 7 Healthy and 1 Unhealthy (the GPU's own health, not its node's), and
  // the first fatal Xid of that GPU and code counts.
  EXPECT_EQ(single("GPUs by health/Healthy"), 7);
  EXPECT_EQ(single("GPUs by health/Degraded"), 0);
  EXPECT_EQ(single("GPUs by health/Unhealthy"), 1);
  EXPECT_EQ(single("Fatal Xids (1h)/"), 1);
  // The per-GPU table names the bad GPU and the component that found it.
  const Json& bad = results["Unhealthy GPUs/"];
  ASSERT_EQ(bad.size(), 1u) << bad.dump();
  EXPECT_EQ(bad[0]["metric"].value("gpu", ""), "0");
  EXPECT_EQ(bad[0]["metric"].value("component", ""), "accelerator-nvidia-error-xid");
  EXPECT_EQ(bad[0]["metric"].value("suggested_action", ""), "REBOOT_SYSTEM");
  EXPECT_EQ(results["GPU temperature/{{node}} GPU {{gpu}}"].size(), 8u);
  EXPECT_EQ(results["Xid rate by code/Xid {{xid}}"][0]["metric"].value("xid", ""), "79");

  prometheus.stop();
  EXPECT_EQ(gpud.stop(), 0) << gpud.log();
}

// The dashboard with the node variable set to one node, as a person looking at that node sees it: a
// healthy node, a node whose GPU 3 was lost and a node whose driver hung, the faults arriving while
// the daemons run (their fake NVML scenario files replaced), under one Prometheus.
TEST(DashboardE2E, ALostGpuAndAHungDriverReadRightPerNode) {
  if (!std::filesystem::exists(kPrometheus))
    GTEST_SKIP() << kPrometheus
                 << " not installed (scripts/install-deps.sh installs Debian's prometheus)";
  const std::string source_dir = GPUD_SOURCE_DIR;
  const std::vector<PanelQuery> queries = dashboard_queries();
  ASSERT_GE(queries.size(), 10u);
  const std::string dir = make_temp_dir();
  ASSERT_FALSE(dir.empty());
  TempDirGuard remove_dir{dir};
  const std::string fixtures = source_dir + "/testing/fixtures/nvml/";
  auto set_scenario = [&](int node, const std::string& fixture) {
    // A new file under the name the library reads: it re-reads on a changed inode.
    const std::string path = dir + "/scenario-" + std::to_string(node) + ".json";
    std::filesystem::copy_file(fixtures + fixture, path + ".new",
                               std::filesystem::copy_options::overwrite_existing);
    std::filesystem::rename(path + ".new", path);
    return path;
  };
  std::vector<std::unique_ptr<DaemonProcess>> nodes;
  for (int i = 1; i <= 3; ++i) {
    const std::string scenario = set_scenario(i, "h100x8-healthy.json");
    std::vector<std::string> flags{"--nvml-lib", GPUD_FAKE_NVML, "--nvidia-check-interval", "1s"};
    if (i > 1)
      flags.insert(flags.end(),
                   {"--tls-cert", dir + "/node-1/gpud.crt", "--tls-key", dir + "/node-1/gpud.key"});
    nodes.push_back(std::make_unique<DaemonProcess>(
        dir + "/node-" + std::to_string(i), flags, true,
        std::vector<std::string>{"FAKE_NVML_SCENARIO=" + scenario,
                                 "GPUD_KMSG_PATH=" + dir + "/kmsg-" + std::to_string(i)}));
    ASSERT_TRUE(nodes.back()->ready()) << nodes.back()->log();
  }
  const int prom_port = free_port();
  {
    std::ofstream config(dir + "/prometheus.yml");
    config << "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n"
           << "rule_files:\n  - " << source_dir << "/deploy/prometheus/gpud-alerts.yml\n  - "
           << source_dir << "/deploy/prometheus/dcgm-compat-rules.yml\n"
           << "scrape_configs:\n  - job_name: gpud\n    scheme: https\n    tls_config:\n"
           << "      ca_file: " << dir << "/node-1/gpud.crt\n      server_name: localhost\n"
           << "    static_configs:\n";
    for (int i = 1; i <= 3; ++i)
      config << "      - targets: ['127.0.0.1:" << nodes[i - 1]->port() << "']\n"
             << "        labels: {node: node-" << i << "}\n";
  }
  ChildProcess prometheus({kPrometheus, "--config.file=" + dir + "/prometheus.yml",
                           "--storage.tsdb.path=" + dir + "/tsdb",
                           "--web.listen-address=127.0.0.1:" + std::to_string(prom_port)},
                          dir + "/prometheus.log");
  PrometheusApi api(prom_port);
  auto deadline = std::chrono::steady_clock::now() + 60s;
  ASSERT_TRUE(wait_until(deadline, [&] {
    return !prometheus.running() ||
           api.query("count(accelerator_nvidia_gpu_health{health=\"Healthy\"} == 1) == 24")
                   .size() == 1;
  })) << read_file(dir + "/prometheus.log");
  ASSERT_TRUE(prometheus.running()) << read_file(dir + "/prometheus.log");
  Json gpu3 =
      api.query("accelerator_nvidia_gpu_health{node=\"node-2\",gpu=\"3\",health=\"Healthy\"}");
  ASSERT_EQ(gpu3.size(), 1u) << gpu3.dump();
  const std::string bus3 = gpu3[0]["metric"].value("pci_bus_id", "");
  ASSERT_FALSE(bus3.empty());

  // GPU 3 of node 2 is lost; node 3's driver hangs (GPU 2's power reading never returns).
  set_scenario(2, "h100x8-gpu-lost.json");
  set_scenario(3, "h100x8-hung-driver.json");
  deadline = std::chrono::steady_clock::now() + 60s;
  ASSERT_TRUE(wait_until(
      deadline,
      [&] {
        return api.query(
                      "accelerator_nvidia_gpu_health{node=\"node-2\",gpu=\"3\",health="
                      "\"Unhealthy\"} "
                      "== 1")
                       .size() == 1 &&
               api.query("accelerator_nvidia_nvml_up{node=\"node-3\"} == 0").size() == 1 &&
               // Not answering reads Initializing until the call's deadline (10 s) declares the
               // driver hung: then every GPU it knew is Unhealthy.
               api.query(
                      "count(accelerator_nvidia_gpu_health{node=\"node-3\",health="
                      "\"Unhealthy\"} == 1) == 8")
                       .size() == 1 &&
               api.query(
                      "count(accelerator_nvidia_temperature_current_celsius{node=\"node-2\"}) == 7")
                       .size() == 1;
      }))
      << nodes[1]->log() << nodes[2]->log();
  std::this_thread::sleep_for(3s);  // a few more scrapes and evaluations of the new state

  // Each panel as the node's own dashboard shows it.
  auto panels_of = [&](const std::string& node) {
    std::map<std::string, Json> results;
    for (const PanelQuery& q : queries)
      results[q.panel + "/" + q.legend] = api.query(substitute_variables(q.expr, node));
    return results;
  };
  auto single = [](std::map<std::string, Json>& results, const std::string& key) {
    const Json& r = results[key];
    return r.size() == 1 ? value_of(r[0]) : -1.0;
  };

  auto healthy = panels_of("node-1");
  EXPECT_EQ(single(healthy, "GPUs by health/Healthy"), 8);
  EXPECT_EQ(single(healthy, "GPUs by health/Unhealthy"), 0);
  EXPECT_TRUE(healthy["Unhealthy GPUs/"].empty()) << healthy["Unhealthy GPUs/"].dump();
  EXPECT_EQ(single(healthy, "NVML up/{{node}}"), 1);
  EXPECT_EQ(healthy["GPU temperature/{{node}} GPU {{gpu}}"].size(), 8u);

  // The lost GPU: 7 and 1, the table names GPU 3 by the bus id it had, with the info component's
  // finding and REBOOT_SYSTEM; its temperature is absent (never the last good value), NVML is up.
  auto lost = panels_of("node-2");
  EXPECT_EQ(single(lost, "GPUs by health/Healthy"), 7);
  EXPECT_EQ(single(lost, "GPUs by health/Unhealthy"), 1);
  const Json& lost_rows = lost["Unhealthy GPUs/"];
  ASSERT_EQ(lost_rows.size(), 1u) << lost_rows.dump();
  EXPECT_EQ(lost_rows[0]["metric"].value("gpu", ""), "3");
  EXPECT_EQ(lost_rows[0]["metric"].value("pci_bus_id", ""), bus3);
  EXPECT_EQ(lost_rows[0]["metric"].value("component", ""), "accelerator-nvidia-info");
  EXPECT_EQ(lost_rows[0]["metric"].value("suggested_action", ""), "REBOOT_SYSTEM");
  EXPECT_EQ(lost["GPU temperature/{{node}} GPU {{gpu}}"].size(), 7u);
  EXPECT_EQ(single(lost, "NVML up/{{node}}"), 1);
  EXPECT_EQ(single(lost, "Unhealthy nodes/"), 1);

  // The hung driver: NVML up reads 0; every GPU it knew reads Unhealthy (NVML's fault is each
  // GPU's); no temperature is served (values that could not be read are absent); the node counts
  // as unhealthy with REBOOT_SYSTEM.
  auto hung = panels_of("node-3");
  EXPECT_EQ(single(hung, "NVML up/{{node}}"), 0);
  EXPECT_EQ(single(hung, "GPUs by health/Healthy"), 0);
  EXPECT_EQ(single(hung, "GPUs by health/Unhealthy"), 8);
  EXPECT_TRUE(hung["GPU temperature/{{node}} GPU {{gpu}}"].empty())
      << hung["GPU temperature/{{node}} GPU {{gpu}}"].dump();
  EXPECT_EQ(single(hung, "Unhealthy nodes/"), 1);
  bool reboot = false;
  for (const Json& r : hung["Suggested actions/"])
    reboot |= r["metric"].value("component", "") == "accelerator-nvidia-info" &&
              r["metric"].value("action", "") == "REBOOT_SYSTEM";
  EXPECT_TRUE(reboot) << hung["Suggested actions/"].dump();

  // The fleet view: the healthy node's GPUs and the lost node's seven others are the Healthy ones.
  auto fleet = panels_of(".*");
  EXPECT_EQ(single(fleet, "GPUs by health/Healthy"), 15);
  EXPECT_EQ(single(fleet, "Unhealthy nodes/"), 2);
  prometheus.stop();
}

}  // namespace
}  // namespace gpud::e2e
