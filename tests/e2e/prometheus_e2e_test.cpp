// End-to-end: Debian's Prometheus scrapes the real daemon over HTTPS, trusting the daemon's own
// self-signed certificate, evaluates deploy/prometheus/gpud-alerts.yml against the live series, and
// answers queries for GPU, host and component-health series with their labels.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "kmsg/writer.h"
#include "tests/e2e/daemon_process.h"
#include "tests/e2e/prometheus_stack.h"

namespace gpud::e2e {
namespace {

using namespace std::chrono_literals;
using Json = nlohmann::json;

constexpr const char* kPrometheus = "/usr/bin/prometheus";
// The fake NVML names GPU i "<prefix><i as two hex digits>".
constexpr const char* kUuidPrefix = "GPU-1d2e3f40-5a6b-7c8d-9e0f-1a2b3c4d5e";

TEST(PrometheusE2E, ScrapesGpudOverTlsAndEvaluatesTheAlertRules) {
  if (!std::filesystem::exists(kPrometheus))
    GTEST_SKIP() << kPrometheus
                 << " not installed (scripts/install-deps.sh installs Debian's prometheus)";
  const std::string dir = make_temp_dir();
  ASSERT_FALSE(dir.empty());
  // Declared first, so it runs last: after Prometheus and the daemon are gone.
  TempDirGuard remove_dir{dir};  // declared first: runs after the processes are gone
  const std::string kmsg = dir + "/kmsg";
  { std::ofstream(kmsg).flush(); }
  const std::string source_dir = GPUD_SOURCE_DIR;
  const std::string rules = source_dir + "/deploy/prometheus/gpud-alerts.yml";
  ASSERT_TRUE(std::filesystem::exists(rules)) << rules;

  // --gpu-count 9 on an 8-GPU node: accelerator-nvidia-gpu-counts turns Unhealthy.
  DaemonProcess gpud(
      dir + "/data", {"--nvml-lib", GPUD_FAKE_NVML, "--gpu-count", "9", "--enable-fault-injection"},
      true,
      {"FAKE_NVML_SCENARIO=" + source_dir + "/testing/fixtures/nvml/h100x8-healthy.json",
       "GPUD_KMSG_PATH=" + kmsg});
  ASSERT_TRUE(gpud.ready()) << gpud.log();
  const std::string cert = dir + "/data/gpud.crt";
  ASSERT_TRUE(std::filesystem::exists(cert)) << "the daemon keeps its certificate in the data dir";
  const std::string instance = "127.0.0.1:" + std::to_string(gpud.port());

  // Prometheus verifies the daemon against its own certificate (no insecure_skip_verify), under a
  // name the certificate covers.
  const int prom_port = free_port();
  const std::string config = dir + "/prometheus.yml";
  std::ofstream(config) << "global:\n"
                        << "  scrape_interval: 1s\n"
                        << "  scrape_timeout: 1s\n"
                        << "  evaluation_interval: 1s\n"
                        << "rule_files:\n"
                        << "  - " << rules << "\n"
                        << "scrape_configs:\n"
                        << "  - job_name: gpud\n"
                        << "    scheme: https\n"
                        << "    tls_config:\n"
                        << "      ca_file: " << cert << "\n"
                        << "      server_name: localhost\n"
                        << "    static_configs:\n"
                        << "      - targets: ['" << instance << "']\n";
  const std::string prom_log = dir + "/prometheus.log";
  ChildProcess prometheus(
      {kPrometheus, "--config.file=" + config, "--storage.tsdb.path=" + dir + "/tsdb",
       "--web.listen-address=127.0.0.1:" + std::to_string(prom_port)},
      prom_log);
  PrometheusApi api(prom_port);
  const auto deadline = std::chrono::steady_clock::now() + 90s;

  // Two successful scrapes (up is 1 for each).
  bool scraped = wait_until(deadline, [&] {
    if (!prometheus.running()) return true;  // reported below
    Json r = api.query("sum_over_time(up{job=\"gpud\"}[5m]) >= 2 and up{job=\"gpud\"} == 1");
    return r.size() == 1;
  });
  ASSERT_TRUE(prometheus.running()) << read_file(prom_log);
  Json targets = api.get("/api/v1/targets");
  ASSERT_TRUE(scraped) << targets.dump() << "\n" << read_file(prom_log);
  ASSERT_TRUE(targets.is_object());
  ASSERT_EQ(targets["activeTargets"].size(), 1u) << targets.dump();
  EXPECT_EQ(targets["activeTargets"][0].value("health", ""), "up") << targets.dump();
  EXPECT_EQ(targets["activeTargets"][0].value("scrapeUrl", ""), "https://" + instance + "/metrics");
  EXPECT_EQ(targets["activeTargets"][0].value("lastError", "x"), "");

  // GPU series: one temperature per GPU, labelled with the fixture's UUIDs, index and bus id.
  Json temps;
  wait_until(deadline, [&] {
    temps = api.query("accelerator_nvidia_temperature_current_celsius{job=\"gpud\"}");
    return temps.size() == 8;
  });
  ASSERT_EQ(temps.size(), 8u) << temps.dump();
  std::set<std::string> uuids, buses;
  for (const Json& s : temps) {
    const Json& m = s["metric"];
    int gpu = std::stoi(m.value("gpu", "-1"));
    ASSERT_GE(gpu, 0);
    ASSERT_LT(gpu, 8);
    char hex[3];
    std::snprintf(hex, sizeof hex, "%02x", gpu);
    EXPECT_EQ(m.value("uuid", ""), kUuidPrefix + std::string(hex)) << m.dump();
    EXPECT_TRUE(std::regex_match(m.value("pci_bus_id", ""), std::regex("0000:[0-9a-f]{2}:00\\.0")))
        << m.dump();
    EXPECT_EQ(m.value("gpud_component", ""), "accelerator-nvidia-temperature");
    EXPECT_EQ(m.value("instance", ""), instance);
    EXPECT_GT(value_of(s), 0);
    uuids.insert(m.value("uuid", ""));
    buses.insert(m.value("pci_bus_id", ""));
  }
  EXPECT_EQ(uuids.size(), 8u);
  EXPECT_EQ(buses.size(), 8u);
  Json found = api.query("accelerator_nvidia_gpu_counts_found{job=\"gpud\"}");
  ASSERT_EQ(found.size(), 1u) << found.dump();
  EXPECT_EQ(value_of(found[0]), 8);

  // Host series.
  Json mem = api.query("memory_total_bytes{job=\"gpud\",gpud_component=\"memory\"}");
  ASSERT_EQ(mem.size(), 1u) << mem.dump();
  EXPECT_GT(value_of(mem[0]), 0);
  Json disk = api.query("disk_total_bytes{job=\"gpud\",mount_point=\"/\"}");
  ASSERT_EQ(disk.size(), 1u) << disk.dump();
  EXPECT_GT(value_of(disk[0]), 0);

  // Component health: exactly one health value is 1 per component; gpu-counts is Unhealthy.
  Json per_component = api.query("sum by (component) (gpud_component_health{job=\"gpud\"})");
  EXPECT_GT(per_component.size(), 10u) << per_component.dump();
  for (const Json& s : per_component) EXPECT_EQ(value_of(s), 1) << s.dump();
  Json unhealthy;
  wait_until(deadline, [&] {
    unhealthy = api.query("gpud_component_health{job=\"gpud\",health=\"Unhealthy\"} == 1");
    return !unhealthy.empty();
  });
  ASSERT_EQ(unhealthy.size(), 1u) << unhealthy.dump();
  EXPECT_EQ(unhealthy[0]["metric"].value("component", ""), "accelerator-nvidia-gpu-counts");
  EXPECT_EQ(api.query("gpud_component_health{component=\"cpu\",health=\"Healthy\"} == 1").size(),
            1u);

  // The alert rules load and evaluate cleanly against live data.
  Json groups;
  bool evaluated = wait_until(deadline, [&] {
    Json data = api.get("/api/v1/rules");
    if (!data.is_object()) return false;
    groups = data["groups"];
    size_t ok = 0;
    for (const Json& g : groups)
      for (const Json& r : g["rules"]) ok += r.value("health", "") == "ok";
    return ok == 11;
  });
  EXPECT_TRUE(evaluated) << groups.dump(1);
  std::set<std::string> alerts;
  for (const Json& g : groups)
    for (const Json& r : g["rules"]) {
      alerts.insert(r.value("name", ""));
      EXPECT_EQ(r.value("health", ""), "ok") << r.dump();
      EXPECT_EQ(r.value("lastError", ""), "") << r.dump();
    }
  EXPECT_EQ(alerts,
            (std::set<std::string>{"GpudComponentUnhealthy", "GpuFatalXid", "NvSwitchFatalSxid",
                                   "GpuRowRemappingPending", "GpuRowRemappingFailed",
                                   "GpuHwSlowdown", "GpuCountBelowExpected", "GpuUnhealthy",
                                   "NvmlNotAnswering", "GpudDown", "GpudAbsent"}));

  // 8 < 9 GPUs: GpuCountBelowExpected is pending (it fires after 2 minutes).
  Json count_alert;
  wait_until(deadline, [&] {
    count_alert = api.query("ALERTS{alertname=\"GpuCountBelowExpected\"}");
    return !count_alert.empty();
  });
  ASSERT_EQ(count_alert.size(), 1u) << count_alert.dump();
  EXPECT_EQ(count_alert[0]["metric"].value("instance", ""), instance);
  EXPECT_EQ(count_alert[0]["metric"].value("severity", ""), "critical");

  // A drill first: an Xid 79 on GPU 0 and a fatal SXid injected (POST /inject-fault) are counted
  // under injected="true", and the alerts leave them out.
  Json gpu0 = api.query("accelerator_nvidia_temperature_current_celsius{job=\"gpud\",gpu=\"0\"}");
  ASSERT_EQ(gpu0.size(), 1u);
  const std::string bus0 = gpu0[0]["metric"].value("pci_bus_id", "");
  for (const std::string& body :
       {"{\"xid\":{\"id\":79,\"pci\":\"" + bus0 + "\"}}",
        std::string("{\"sxid\":{\"id\":20034,\"pci\":\"0000:05:00.0\"}}")}) {
    httplib::Client cli(gpud.url());
    cli.enable_server_certificate_verification(false);
    cli.set_read_timeout(10, 0);
    auto r = cli.Post("/inject-fault", body, "application/json");
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
  }
  Json drills;
  ASSERT_TRUE(wait_until(
      deadline,
      [&] {
        drills = api.query(
            "{__name__=~\"accelerator_nvidia_s?xid_errors_total\",job=\"gpud\",injected=\"true\"}");
        return drills.size() == 2;
      }))
      << drills.dump() << "\n"
      << gpud.log();
  // Two rule evaluations after the drills were scraped: neither fatal alert is pending or firing.
  std::this_thread::sleep_for(2500ms);
  Json drill_alerts = api.query("ALERTS{alertname=~\"GpuFatalXid|NvSwitchFatalSxid\"}");
  EXPECT_TRUE(drill_alerts.empty()) << drill_alerts.dump();

  // The same faults from the driver (the kernel log the daemon follows) fire their alerts at once,
  // labelled with the device.
  {
    std::ofstream log(kmsg, std::ios::app);
    log << xid_kmsg_record(100, bus0, 79);
    double uptime_s = 0;
    std::ifstream("/proc/uptime") >> uptime_s;
    log << "4,101," << static_cast<long>(uptime_s * 1e6) << ",-;"
        << kmsg::sxid_line(20034, "0000:05:00.0") << "\n";
  }
  Json xid_alert, sxid_alert;
  wait_until(deadline, [&] {
    xid_alert = api.query("ALERTS{alertname=\"GpuFatalXid\",alertstate=\"firing\"}");
    sxid_alert = api.query("ALERTS{alertname=\"NvSwitchFatalSxid\",alertstate=\"firing\"}");
    return !xid_alert.empty() && !sxid_alert.empty();
  });
  ASSERT_EQ(xid_alert.size(), 1u) << xid_alert.dump() << "\n" << gpud.log();
  const Json& m = xid_alert[0]["metric"];
  EXPECT_EQ(m.value("xid", ""), "79");
  EXPECT_EQ(m.value("type", ""), "Fatal");
  EXPECT_EQ(m.value("uuid", ""), kUuidPrefix + std::string("00"));
  EXPECT_EQ(m.value("pci_bus_id", ""), bus0);
  EXPECT_EQ(m.value("instance", ""), instance);
  EXPECT_EQ(m.value("severity", ""), "critical");
  ASSERT_EQ(sxid_alert.size(), 1u) << sxid_alert.dump() << "\n" << gpud.log();
  EXPECT_EQ(sxid_alert[0]["metric"].value("sxid", ""), "20034");
  // The daemon reads this machine's sysfs, which has no NVSwitch at 0000:05:00.0: a bus id that is
  // none of the node's devices is counted under "unknown" (bounded series), and the alert still
  // fires.
  EXPECT_EQ(sxid_alert[0]["metric"].value("pci_bus_id", ""), "unknown");
  EXPECT_EQ(m.value("injected", ""), "");
  // Nothing else fires: apart from its GPU count the node is healthy, and gpud is up (GpuUnhealthy
  // for GPU 0 waits out its `for`).
  Json firing =
      api.query("ALERTS{alertstate=\"firing\",alertname!~\"GpuFatalXid|NvSwitchFatalSxid\"}");
  EXPECT_TRUE(firing.empty()) << firing.dump();

  prometheus.stop();
  EXPECT_EQ(gpud.stop(), 0) << gpud.log();
}

}  // namespace
}  // namespace gpud::e2e
