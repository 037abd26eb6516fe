// End-to-end: a fleet of three gpud daemons (each its own data dir, port, kernel-log file and fake
// NVML scenario), Debian's Prometheus scraping them with the shipped rules (gpud-alerts.yml,
// dcgm-compat-rules.yml) and Debian's Alertmanager with the shipped example
// (deploy/alertmanager/alertmanager.yml), notifying a webhook receiver in this test.
//
// Time is scaled so the test takes seconds, not minutes: scrape and rule evaluation every second,
// every `for: Nm` of the alert rules becomes `for: Ns`, Alertmanager's group_wait becomes 1 s and
// group_interval 2 s. The rules' expressions, labels and annotations and Alertmanager's routing,
// grouping and inhibition are the shipped ones.
//
// An Xid 79 on node 2 must bring exactly one firing notification for node 2 (naming the component,
// the GPU and the suggested action), none for nodes 1 and 3; set-healthy on node 2 the resolved
// one; killing node 3's daemon the GpudDown one for node 3.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <mutex>
#include <regex>
#include <thread>

#include "tests/e2e/daemon_process.h"
#include "tests/e2e/prometheus_stack.h"

namespace gpud::e2e {
namespace {

using namespace std::chrono_literals;
using Json = nlohmann::json;
using SteadyClock = std::chrono::steady_clock;

constexpr const char* kPrometheus = "/usr/bin/prometheus";
constexpr const char* kAlertmanager = "/usr/bin/prometheus-alertmanager";
constexpr const char* kXidComponent = "accelerator-nvidia-error-xid";

// Replaces every match of `pattern` in `text`; the test fails unless there were `expected`.
std::string replace_all(const std::string& text, const std::string& pattern,
                        const std::string& replacement, int expected) {
  std::regex re(pattern);
  int matches = static_cast<int>(
      std::distance(std::sregex_iterator(text.begin(), text.end(), re), std::sregex_iterator()));
  EXPECT_EQ(matches, expected) << "/" << pattern << "/ in the shipped file";
  return std::regex_replace(text, re, replacement);
}

// The alert receiver: Alertmanager's webhook notifications, as they arrive.
class WebhookReceiver {
 public:
  struct Notification {
    SteadyClock::time_point received;
    Json body;
  };

  WebhookReceiver() {
    server_.Post("/alerts", [this](const httplib::Request& req, httplib::Response& res) {
      Json body = parse_json(req.body);
      {
        std::lock_guard lock(mu_);
        notifications_.push_back({SteadyClock::now(), body});
      }
      std::string names;
      for (const Json& a : body["alerts"])
        names += " " + a["labels"].value("alertname", "?") + "(" + a.value("status", "?") + ")";
      std::cout << "[ fleet ] notification: " << body.value("status", "?") << " "
                << body["groupLabels"].dump() << " " << body["alerts"].size()
                << " alert(s):" << names << "\n";
      res.set_content("{}", "application/json");
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
  }
  ~WebhookReceiver() {
    server_.stop();
    if (thread_.joinable()) thread_.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_) + "/alerts"; }

  // Notifications whose group is node `node` and whose status is `status` ("" for any).
  std::vector<Notification> of(const std::string& node, const std::string& status = "") const {
    std::lock_guard lock(mu_);
    std::vector<Notification> out;
    for (const Notification& n : notifications_) {
      const Json& group = n.body["groupLabels"];
      if (!group.is_object() || group.value("node", "") != node) continue;
      if (!status.empty() && n.body.value("status", "") != status) continue;
      out.push_back(n);
    }
    return out;
  }
  Json all() const {
    std::lock_guard lock(mu_);
    Json out = Json::array();
    for (const Notification& n : notifications_) out.push_back(n.body);
    return out;
  }

 private:
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
  mutable std::mutex mu_;
  std::vector<Notification> notifications_;
};

// The alert of one notification with this alertname, or null.
Json alert_named(const Json& notification, const std::string& alertname) {
  for (const Json& a : notification["alerts"])
    if (a["labels"].value("alertname", "") == alertname) return a;
  return nullptr;
}

TEST(FleetE2E, OneBadGpuPagesOnceResolvesWithSetHealthyAndADeadDaemonPages) {
  for (const char* program : {kPrometheus, kAlertmanager})
    if (!std::filesystem::exists(program))
      GTEST_SKIP() << program
                   << " not installed (scripts/install-deps.sh installs Debian's prometheus and "
                      "prometheus-alertmanager)";
  const std::string dir = make_temp_dir();
  ASSERT_FALSE(dir.empty());
  TempDirGuard remove_dir{dir};  // declared first: runs after the processes are gone
  const std::string source_dir = GPUD_SOURCE_DIR;
  WebhookReceiver receiver;

  // Three nodes, each its own scenario, kernel log and data dir. Node 1 makes the TLS certificate
  // the others serve too, so one scrape job verifies all three.
  const char* scenarios[] = {"h100x8-healthy.json", "a100x8-healthy.json", "rtx4090x1-no-ecc.json"};
  std::vector<std::unique_ptr<DaemonProcess>> nodes;
  std::vector<std::string> kmsg;
  for (int i = 0; i < 3; ++i) {
    const std::string node_dir = dir + "/node-" + std::to_string(i + 1);
    std::filesystem::create_directories(node_dir);
    kmsg.push_back(node_dir + "/kmsg");
    { std::ofstream(kmsg.back()).flush(); }
    std::vector<std::string> flags{"--nvml-lib", GPUD_FAKE_NVML};
    if (i > 0)
      flags.insert(flags.end(), {"--tls-cert", dir + "/node-1/data/gpud.crt", "--tls-key",
                                 dir + "/node-1/data/gpud.key"});
    nodes.push_back(std::make_unique<DaemonProcess>(
        node_dir + "/data", flags, true,
        std::vector<std::string>{
            "FAKE_NVML_SCENARIO=" + source_dir + "/testing/fixtures/nvml/" + scenarios[i],
            "GPUD_KMSG_PATH=" + kmsg.back()}));
    ASSERT_TRUE(nodes.back()->ready()) << nodes.back()->log();
  }

  // The shipped rules, `for: Nm` scaled to `for: Ns`.
  const std::string alerts_yml = dir + "/gpud-alerts.yml";
  std::ofstream(alerts_yml) << replace_all(
      read_file(source_dir + "/deploy/prometheus/gpud-alerts.yml"), "for: ([0-9]+)m", "for: $1s",
      7);
  const std::string dcgm_yml = source_dir + "/deploy/prometheus/dcgm-compat-rules.yml";

  // The shipped Alertmanager example with its timers scaled and the webhook pointed here.
  std::string am_config = read_file(source_dir + "/deploy/alertmanager/alertmanager.yml");
  am_config = replace_all(am_config, "group_wait: \\S+", "group_wait: 1s", 1);
  am_config = replace_all(am_config, "group_interval: \\S+", "group_interval: 2s", 1);
  am_config = replace_all(am_config, "url: \\S+", "url: " + receiver.url(), 1);
  std::ofstream(dir + "/alertmanager.yml") << am_config;
  const int am_port = free_port();
  ChildProcess alertmanager({kAlertmanager, "--config.file=" + dir + "/alertmanager.yml",
                             "--storage.path=" + dir + "/alertmanager",
                             "--web.listen-address=127.0.0.1:" + std::to_string(am_port),
                             "--cluster.listen-address="},  // no HA peers: no port 9094
                            dir + "/alertmanager.log");

  const int prom_port = free_port();
  std::ofstream config(dir + "/prometheus.yml");
  config << "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n"
         << "rule_files:\n  - " << alerts_yml << "\n  - " << dcgm_yml << "\n"
         << "alerting:\n  alertmanagers:\n    - static_configs:\n"
         << "        - targets: ['127.0.0.1:" << am_port << "']\n"
         << "scrape_configs:\n  - job_name: gpud\n    scheme: https\n    tls_config:\n"
         << "      ca_file: " << dir << "/node-1/data/gpud.crt\n      server_name: localhost\n"
         << "    static_configs:\n";
  for (int i = 0; i < 3; ++i)
    config << "      - targets: ['127.0.0.1:" << nodes[i]->port() << "']\n"
           << "        labels: {node: node-" << i + 1 << "}\n";
  config.close();
  ChildProcess prometheus(prometheus_command(kPrometheus, dir, prom_port), dir + "/prometheus.log");
  PrometheusApi api(prom_port);
  auto logs = [&] {
    return "prometheus:\n" + read_file(dir + "/prometheus.log") + "\nalertmanager:\n" +
           read_file(dir + "/alertmanager.log") + "\nnotifications: " + receiver.all().dump(1);
  };

  // All three scraped, the rules evaluated, nothing pending or firing: a quiet fleet.
  bool quiet = wait_until(SteadyClock::now() + 60s, [&] {
    if (!prometheus.running() || !alertmanager.running()) return true;  // reported below
    return api.query("count(up{job=\"gpud\"} == 1) == 3").size() == 1 &&
           api.query("count(DCGM_FI_DEV_GPU_TEMP) == 17").size() == 1 &&
           api.query("ALERTS").empty();
  });
  ASSERT_TRUE(prometheus.running() && alertmanager.running()) << logs();
  ASSERT_TRUE(quiet) << api.query("ALERTS").dump() << "\n" << logs();
  httplib::Client am("127.0.0.1", am_port);
  auto am_ready = am.Get("/-/ready");
  ASSERT_TRUE(am_ready && am_ready->status == 200) << logs();

  // Xid 79 ("GPU has fallen off the bus") on node 2's GPU 0, in the kernel log node 2 follows.
  Json gpu0 = api.query(
      "accelerator_nvidia_temperature_current_celsius{job=\"gpud\",node=\"node-2\",gpu=\"0\"}");
  ASSERT_EQ(gpu0.size(), 1u) << gpu0.dump();
  const std::string bus = gpu0[0]["metric"].value("pci_bus_id", "");
  const std::string uuid = gpu0[0]["metric"].value("uuid", "");
  const auto injected = SteadyClock::now();
  std::ofstream(kmsg[1], std::ios::app) << xid_kmsg_record(1, bus, 79);

  ASSERT_TRUE(wait_until(SteadyClock::now() + 60s,
                         [&] { return !receiver.of("node-2", "firing").empty(); }))
      << nodes[1]->log() << logs();
  const auto notified = receiver.of("node-2", "firing")[0].received;
  const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(notified - injected);
  std::cout << "[ fleet ] Xid 79 in node 2's kernel log to the firing notification: "
            << took.count() << " ms\n";
  // Scrape (1 s) + evaluation (1 s) + group_wait (1 s), with slack for a loaded 2-core machine.
  EXPECT_LT(took, 15s);

  const Json firing = receiver.of("node-2", "firing")[0].body;
  Json xid_alert = alert_named(firing, "GpuFatalXid");
  ASSERT_TRUE(xid_alert.is_object()) << firing.dump(1);
  const Json& labels = xid_alert["labels"];
  EXPECT_EQ(labels.value("node", ""), "node-2");
  EXPECT_EQ(labels.value("component", ""), kXidComponent);
  EXPECT_EQ(labels.value("uuid", ""), uuid);
  EXPECT_EQ(labels.value("pci_bus_id", ""), bus);
  EXPECT_EQ(labels.value("xid", ""), "79");
  EXPECT_EQ(labels.value("severity", ""), "critical");
  EXPECT_EQ(xid_alert["annotations"].value("suggested_action", ""), "REBOOT_SYSTEM");
  EXPECT_NE(xid_alert["annotations"].value("summary", "").find(bus), std::string::npos);

  // The component alert fires too (after its scaled `for`), but Alertmanager mutes it under the
  // Xid alert: no second notification while both fire.
  ASSERT_TRUE(wait_until(SteadyClock::now() + 30s, [&] {
    return api.query(
                  "ALERTS{alertname=\"GpudComponentUnhealthy\",alertstate=\"firing\","
                  "node=\"node-2\",component=\"" +
                  std::string(kXidComponent) + "\"}")
               .size() == 1;
  })) << api.query("ALERTS").dump();
  bool muted = wait_until(SteadyClock::now() + 15s, [&] {
    auto r = am.Get("/api/v2/alerts?filter=alertname%3D%22GpudComponentUnhealthy%22");
    if (!r || r->status != 200) return false;
    Json alerts = parse_json(r->body);
    return alerts.is_array() && alerts.size() == 1 &&
           alerts[0]["status"].value("state", "") == "suppressed" &&
           !alerts[0]["status"]["inhibitedBy"].empty();
  });
  EXPECT_TRUE(muted) << am.Get("/api/v2/alerts")->body;
  std::this_thread::sleep_for(5s);  // two group intervals: a second notification would be here
  EXPECT_EQ(receiver.of("node-2", "firing").size(), 1u) << receiver.all().dump(1);

  // set-healthy (root over loopback) on node 2: the Xid component turns Healthy and both alerts
  // resolve: one resolved notification.
  auto set =
      nodes[1]->post(std::string("/v1/health-states/set-healthy?components=") + kXidComponent);
  ASSERT_TRUE(set);
  ASSERT_EQ(set->status, 200) << set->body;
  const auto set_healthy = SteadyClock::now();
  ASSERT_TRUE(wait_until(SteadyClock::now() + 30s, [&] {
    return !receiver.of("node-2", "resolved").empty();
  })) << logs();
  std::cout << "[ fleet ] set-healthy to the resolved notification: "
            << std::chrono::duration_cast<std::chrono::milliseconds>(
                   receiver.of("node-2", "resolved")[0].received - set_healthy)
                   .count()
            << " ms\n";
  // The rules see the Xid component Healthy and the GPU's health come back on different
  // evaluations, so on a loaded machine the alerts may resolve in two notifications of the group:
  // GpuFatalXid's resolution arrives within a group interval, in a "resolved" notification, or in
  // a "firing" one when it resolved first and GpuUnhealthy was still firing (seen in a fresh
  // clone's run: "GpuUnhealthy(firing) GpuFatalXid(resolved)", then "GpuUnhealthy(resolved)").
  auto fatal_xid_resolved = [&] {
    for (const auto& n : receiver.of("node-2")) {
      if (n.received < set_healthy) continue;
      const Json a = alert_named(n.body, "GpuFatalXid");
      if (a.is_object() && a.value("status", "") == "resolved") return true;
    }
    return false;
  };
  ASSERT_TRUE(wait_until(SteadyClock::now() + 10s, fatal_xid_resolved)) << receiver.all().dump(1);
  for (const auto& n : receiver.of("node-2", "resolved"))
    for (const Json& a : n.body["alerts"]) EXPECT_EQ(a.value("status", ""), "resolved");

  // Node 3's daemon dies: GpudDown for node 3 (its `for: 5m` scaled to 5 s).
  nodes[2]->stop(SIGKILL);
  const auto killed = SteadyClock::now();
  ASSERT_TRUE(wait_until(SteadyClock::now() + 60s, [&] {
    return !receiver.of("node-3", "firing").empty();
  })) << logs();
  std::cout << "[ fleet ] node 3 killed to the GpudDown notification: "
            << std::chrono::duration_cast<std::chrono::milliseconds>(
                   receiver.of("node-3", "firing")[0].received - killed)
                   .count()
            << " ms\n";
  const Json down = receiver.of("node-3", "firing")[0].body;
  Json down_alert = alert_named(down, "GpudDown");
  ASSERT_TRUE(down_alert.is_object()) << down.dump(1);
  EXPECT_EQ(down_alert["labels"].value("node", ""), "node-3");
  EXPECT_EQ(down_alert["labels"].value("instance", ""),
            "127.0.0.1:" + std::to_string(nodes[2]->port()));
  EXPECT_EQ(down["alerts"].size(), 1u) << down.dump(1);

  // Over the whole run: nothing for node 1; node 2 paged once and resolved once; node 3 only its
  // GpudDown.
  EXPECT_TRUE(receiver.of("node-1").empty()) << receiver.all().dump(1);
  EXPECT_EQ(receiver.of("node-2", "firing").size(), 1u) << receiver.all().dump(1);
  EXPECT_EQ(receiver.of("node-2", "resolved").size(), 1u) << receiver.all().dump(1);
  EXPECT_EQ(receiver.of("node-3").size(), 1u) << receiver.all().dump(1);

  prometheus.stop();
  alertmanager.stop();
  EXPECT_EQ(nodes[0]->stop(), 0) << nodes[0]->log();
  EXPECT_EQ(nodes[1]->stop(), 0) << nodes[1]->log();
}

}  // namespace
}  // namespace gpud::e2e
