// End-to-end: the fuse, power-supply, systemd, tailscale and network-latency components through
// `gpud run` (their state, events and gauges over the API) and `gpud scan`, on fixture trees,
// scripts standing in for systemctl and tailscale, and local sockets.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "testing/fake_command.h"
#include "tests/e2e/daemon_process.h"

namespace gpud::e2e {
namespace {

using testing_support::FakeCommands;

std::string fixture(const std::string& rel) {
  return std::string(GPUD_SOURCE_DIR) + "/testing/fixtures/" + rel;
}

// The component's first state once its first check has landed (null after 30 s).
nlohmann::json first_state(const DaemonProcess& d, const std::string& component) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < deadline) {
    auto r = d.get("/v1/states?components=" + component);
    if (r && r->status == 200) {
      auto body = parse_json(r->body);
      if (body.is_array() && !body.empty() && !body[0]["states"].empty() &&
          body[0]["states"][0]["health"] != "Initializing")
        return body[0]["states"][0];
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return nullptr;
}

std::string metrics_text(const DaemonProcess& d) {
  auto r = d.get("/metrics");
  return r && r->status == 200 ? r->body : std::string();
}

// A daemon with a private data dir (removed afterwards) running only `component`.
struct Daemon {
  Daemon(const std::string& component, std::vector<std::string> extra,
         std::vector<std::string> env = {})
      : dir{make_temp_dir()} {
    extra.insert(extra.begin(), {"--components", component});
    d = std::make_unique<DaemonProcess>(dir.path + "/data", extra, false, std::move(env));
  }
  TempDirGuard dir;
  std::unique_ptr<DaemonProcess> d;
};

// `gpud scan` with PATH set to `path` (when not empty), only these components.
CommandResult scan(const std::string& components, const std::string& args,
                   const std::string& path = "") {
  std::string cmd = (path.empty() ? std::string() : "PATH='" + path + "' ") + GPUD_BINARY +
                    " scan --config '' --log-level error --components " + components + " " + args;
  return shell(cmd);
}

// A TCP listener on 127.0.0.1; `closed_port` is a port nothing listens on.
struct Listener {
  int fd = -1;
  int port = 0;
  Listener() {
    fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (::bind(fd, reinterpret_cast<sockaddr*>(&a), len) == 0 && ::listen(fd, 64) == 0 &&
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0)
      port = ntohs(a.sin_port);
  }
  ~Listener() { ::close(fd); }
};

int closed_port() {
  Listener l;
  return l.port;  // closed when l goes
}

TEST(FuseE2E, CongestedConnectionIsDegradedWithItsEventAndGauges) {
  Daemon x("fuse", {"--host-root", fixture("host/fuse-congested")});
  ASSERT_TRUE(x.d->ready()) << x.d->log();
  auto s = first_state(*x.d, "fuse");
  ASSERT_FALSE(s.is_null()) << x.d->log();
  EXPECT_EQ(s["health"], "Degraded") << s.dump();
  EXPECT_NE(s["reason"].get<std::string>().find("ubuntu@10.0.0.7:/datasets on /mnt/datasets"),
            std::string::npos)
      << s.dump();
  auto events = x.d->get("/v1/events?components=fuse");
  ASSERT_TRUE(events);
  EXPECT_NE(events->body.find("\"fuse_connections\""), std::string::npos) << events->body;
  EXPECT_NE(events->body.find("\"Critical\""), std::string::npos) << events->body;
  std::string m = metrics_text(*x.d);
  EXPECT_NE(m.find("fuse_connections_congested_percent_against_threshold{connection=\"52\","
                   "device_name=\"ubuntu@10.0.0.7:/datasets\",gpud_component=\"fuse\"} 122.2"),
            std::string::npos)
      << m;
}

TEST(FuseE2E, ScanIsHealthyOnIdleConnectionsAndNamesACongestedOne) {
  auto ok = scan("fuse", "--host-root " + fixture("host/fuse-healthy"));
  EXPECT_EQ(ok.exit_code, 0) << ok.out;
  auto bad = scan("fuse", "--host-root " + fixture("host/fuse-congested"));
  EXPECT_EQ(bad.exit_code, 1) << bad.out;
  EXPECT_NE(bad.out.find("/mnt/datasets"), std::string::npos) << bad.out;
}

TEST(PowerSupplyE2E, OfflineSupplyIsDegradedOverTheApi) {
  Daemon x("power-supply", {"--host-root", fixture("host/power-supply-offline")});
  ASSERT_TRUE(x.d->ready()) << x.d->log();
  auto s = first_state(*x.d, "power-supply");
  ASSERT_FALSE(s.is_null()) << x.d->log();
  EXPECT_EQ(s["health"], "Degraded") << s.dump();
  EXPECT_EQ(s["reason"], "power supply present but offline: AC (Mains)");
  std::string m = metrics_text(*x.d);
  EXPECT_NE(m.find("power_supply_online{gpud_component=\"power-supply\",supply=\"AC\",type="
                   "\"Mains\"} 0"),
            std::string::npos)
      << m;
}

TEST(PowerSupplyE2E, ScanIsHealthyOnlineAndNamesAGarbledSupply) {
  auto ok = scan("power-supply", "--host-root " + fixture("host/power-supply-healthy"));
  EXPECT_EQ(ok.exit_code, 0) << ok.out;
  auto bad = scan("power-supply", "--host-root " + fixture("host/power-supply-garbled"));
  EXPECT_EQ(bad.exit_code, 1) << bad.out;
  EXPECT_NE(bad.out.find("AC: online not 0, 1 or 2"), std::string::npos) << bad.out;
}

TEST(SystemdE2E, FailedAndRestartLoopingUnitsAreUnhealthyOverTheApi) {
  FakeCommands bin;
  bin.printing("systemctl", fixture("systemd/show-defaults-failed.txt"));
  Daemon x("systemd", {"--host-root", fixture("host/systemd-host")},
           {"PATH=" + bin.dir() + ":/usr/bin:/bin"});
  ASSERT_TRUE(x.d->ready()) << x.d->log();
  auto s = first_state(*x.d, "systemd");
  ASSERT_FALSE(s.is_null()) << x.d->log();
  EXPECT_EQ(s["health"], "Unhealthy") << s.dump();
  EXPECT_NE(s["reason"].get<std::string>().find("unit nvidia-persistenced.service failed"),
            std::string::npos)
      << s.dump();
  EXPECT_NE(s["reason"].get<std::string>().find("unit kubelet.service is restart-looping"),
            std::string::npos)
      << s.dump();
  std::string m = metrics_text(*x.d);
  EXPECT_NE(m.find("systemd_unit_restarts{gpud_component=\"systemd\",unit=\"kubelet.service\"} 7"),
            std::string::npos)
      << m;
}

TEST(SystemdE2E, NotApplicableWithoutSystemdAsPid1) {
  Daemon x("systemd", {"--host-root", fixture("host/debian12")});
  ASSERT_TRUE(x.d->ready()) << x.d->log();
  auto components = x.d->get("/v1/components");
  ASSERT_TRUE(components);
  EXPECT_NE(components->body.find("\"systemd\""), std::string::npos) << components->body;
  // Listed, but without states: the API leaves out what is not supported here.
  auto states = x.d->get("/v1/states?components=systemd");
  ASSERT_TRUE(states);
  EXPECT_EQ(states->status, 200) << states->body;
  EXPECT_EQ(parse_json(states->body), nlohmann::json::array()) << states->body;
  auto trigger = x.d->get("/v1/components/trigger-check?componentName=systemd");
  ASSERT_TRUE(trigger);
  EXPECT_EQ(trigger->status, 404) << trigger->body;
  EXPECT_NE(trigger->body.find("not supported on this machine"), std::string::npos)
      << trigger->body;
}

TEST(SystemdE2E, ScanIsHealthyOnActiveUnitsAndNamesTheFailedOnes) {
  FakeCommands ok_bin, bad_bin;
  ok_bin.printing("systemctl", fixture("systemd/show-defaults-healthy.txt"));
  bad_bin.printing("systemctl", fixture("systemd/show-defaults-failed.txt"));
  const std::string root = "--host-root " + fixture("host/systemd-host");
  auto ok = scan("systemd", root, ok_bin.dir() + ":/usr/bin:/bin");
  EXPECT_EQ(ok.exit_code, 0) << ok.out;
  auto bad = scan("systemd", root, bad_bin.dir() + ":/usr/bin:/bin");
  EXPECT_EQ(bad.exit_code, 1) << bad.out;
  EXPECT_NE(bad.out.find("nvidia-persistenced.service"), std::string::npos) << bad.out;
  // --systemd-units names the units; one that does not exist is Unhealthy.
  FakeCommands missing_bin;
  missing_bin.script("systemctl",
                     "printf 'Id=lustre-client.service\\nLoadState=not-found\\n"
                     "ActiveState=inactive\\nSubState=dead\\n'");
  auto missing = scan("systemd", root + " --systemd-units lustre-client",
                      missing_bin.dir() + ":/usr/bin:/bin");
  EXPECT_EQ(missing.exit_code, 1) << missing.out;
  EXPECT_NE(missing.out.find("unit lustre-client.service is not-found"), std::string::npos)
      << missing.out;
}

TEST(TailscaleE2E, BackendStateOverTheApiFromTheTailscaleCommand) {
  FakeCommands bin;
  bin.script("tailscaled", "exit 0");
  bin.printing("tailscale", fixture("tailscale/status-needs-login.json"));
  Daemon x("tailscale", {"--host-root", fixture("host/debian12")},
           {"PATH=" + bin.dir() + ":/usr/bin:/bin"});
  ASSERT_TRUE(x.d->ready()) << x.d->log();
  auto s = first_state(*x.d, "tailscale");
  ASSERT_FALSE(s.is_null()) << x.d->log();
  EXPECT_EQ(s["health"], "Unhealthy") << s.dump();
  EXPECT_EQ(s["reason"], "tailscale backend state is NeedsLogin");
}

TEST(TailscaleE2E, ScanHealthyWhenRunningUnhealthyWhenTheServiceIsInactive) {
  FakeCommands ok_bin, bad_bin;
  for (FakeCommands* b : {&ok_bin, &bad_bin}) {
    b->script("tailscaled", "exit 0");
    b->printing("tailscale", fixture("tailscale/status-running.json"));
  }
  ok_bin.printing("systemctl", fixture("systemd/show-tailscaled-active.txt"));
  bad_bin.printing("systemctl", fixture("systemd/show-tailscaled-inactive.txt"));
  const std::string root = "--host-root " + fixture("host/systemd-host");
  auto ok = scan("tailscale", root, ok_bin.dir() + ":/usr/bin:/bin");
  EXPECT_EQ(ok.exit_code, 0) << ok.out;
  auto bad = scan("tailscale", root, bad_bin.dir() + ":/usr/bin:/bin");
  EXPECT_EQ(bad.exit_code, 1) << bad.out;
  EXPECT_NE(bad.out.find("tailscaled service is inactive"), std::string::npos) << bad.out;
  // Not installed: not applicable, so scan has nothing to report for it.
  auto none = scan("tailscale", root, "/nonexistent");
  EXPECT_EQ(none.exit_code, 0) << none.out;
  EXPECT_EQ(none.out.find("✘"), std::string::npos) << none.out;
}

TEST(NetworkLatencyE2E, LatencyGaugePerTargetAndAClosedPortIsUnhealthy) {
  Listener open;
  ASSERT_NE(open.port, 0);
  const std::string up = "127.0.0.1:" + std::to_string(open.port);
  const std::string down = "127.0.0.1:" + std::to_string(closed_port());
  Daemon x("network-latency",
           {"--network-latency-targets", up + "," + down, "--network-latency-threshold", "2s"});
  ASSERT_TRUE(x.d->ready()) << x.d->log();
  auto s = first_state(*x.d, "network-latency");
  ASSERT_FALSE(s.is_null()) << x.d->log();
  EXPECT_EQ(s["health"], "Unhealthy") << s.dump();
  EXPECT_EQ(s["reason"], "cannot connect to " + down + " (Connection refused)");
  std::string m = metrics_text(*x.d);
  EXPECT_NE(m.find("network_latency_tcp_connect_milliseconds{gpud_component=\"network-latency\","
                   "target=\"" +
                   up + "\"}"),
            std::string::npos)
      << m;
  EXPECT_EQ(m.find("target=\"" + down + "\""), std::string::npos) << m;
}

TEST(NetworkLatencyE2E, ScanHealthyUnderTheThresholdNamesASlowOrClosedTarget) {
  Listener open;
  const std::string up = "127.0.0.1:" + std::to_string(open.port);
  auto ok = scan("network-latency", "--network-latency-targets " + up);
  EXPECT_EQ(ok.exit_code, 0) << ok.out;
  const std::string down = "127.0.0.1:" + std::to_string(closed_port());
  auto bad = scan("network-latency", "--network-latency-targets " + up + "," + down);
  EXPECT_EQ(bad.exit_code, 1) << bad.out;
  EXPECT_NE(bad.out.find(down), std::string::npos) << bad.out;
  // No targets: not applicable.
  auto none = scan("network-latency", "");
  EXPECT_EQ(none.exit_code, 0) << none.out;
}

TEST(NetworkLatencyE2E, ConfigFileAndCommandLineRefuseABadTarget) {
  TempDirGuard dir{make_temp_dir()};
  const std::string config = dir.path + "/gpud.yaml";
  {
    std::ofstream(config) << "network-latency-targets: [\"10.0.0.1:443\", \"no-port\"]\n"
                             "network-latency-threshold: 250ms\n"
                             "systemd-units: [containerd, kubelet]\n";
  }
  auto r = run_gpud({"scan", "--config", config, "--components", "network-latency"});
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.out.find("invalid --network-latency-targets: \"no-port\": want host:port"),
            std::string::npos)
      << r.out;
  auto threshold = run_gpud({"scan", "--network-latency-threshold", "soon"});
  EXPECT_EQ(threshold.exit_code, 2) << threshold.out;
  EXPECT_NE(threshold.out.find("invalid --network-latency-threshold"), std::string::npos)
      << threshold.out;
}

}  // namespace
}  // namespace gpud::e2e
