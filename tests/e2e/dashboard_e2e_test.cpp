// End-to-end: every query of the Grafana dashboard (deploy/grafana/gpud-fleet.json) runs against a
// live Prometheus that scrapes gpud (fake NVML, eight GPUs, an Xid 79 in its kernel log) with the
// shipped rules: each panel query and each template-variable query must parse and return series,
// and the fleet panels must count what this node has.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>

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

// Grafana's variables as a query for the whole fleet: every node, a rate window of a minute.
std::string substitute_variables(std::string expr) {
  expr = std::regex_replace(expr, std::regex("\\$__rate_interval"), "1m");
  expr = std::regex_replace(expr, std::regex("\\$node\\b"), ".*");
  return expr;
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

}  // namespace
}  // namespace gpud::e2e
