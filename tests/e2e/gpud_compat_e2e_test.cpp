// A GPUd user's node: every GPUd flag of `run` starts the daemon and it serves, GPUd's FLAGS line
// too; GPUd's test injectors are refused; GPUd's verbs (login, notify, update, release, metadata,
// `s`, `down --reset-state`, `machine-info --output-format`, `up --token`) answer as docs/CLI.md
// says.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <optional>
#include <sstream>

#include "app/gpud_flags.h"
#include "core/time_util.h"
#include "testing/gpud_state_file.h"
#include "tests/e2e/daemon_process.h"

namespace fs = std::filesystem;

namespace gpud::e2e {
namespace {

using app::GpudFlagUse;

size_t count_of(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// The value each GPUd `run` flag gets (GPUd's usage text's examples where it gives one); "" for
// a boolean flag. --data-dir and --listen-address are the test daemon's own.
std::map<std::string, std::string> gpud_run_values(const std::string& dir) {
  return {
      {"db-in-memory", ""},
      {"endpoint", "gpud-manager-prod01.dgxc-lepton.nvidia.com"},
      {"machine-id", "m-0123456789"},
      {"machine-id-overwrite", ""},
      {"refresh-session-token", ""},
      {"token", "lepton-workspace-token"},
      {"log-level", "info"},
      {"log-file", dir + "/gpud.log"},
      {"pprof", ""},
      {"enable-auto-update", "false"},
      {"auto-update-exit-code", "-1"},
      {"reboot-commands", "systemctl reboot"},
      {"findmnt-commands", "nsenter --target 1 --mount -- findmnt"},
      {"lsblk-commands", "nsenter --target 1 --mount -- lsblk"},
      {"blockdev-usage-commands", "nsenter --target 1 --mount -- df"},
      {"nfs-host-root", "/"},
      {"containerd-service-active-commands",
       "nsenter --target 1 --mount -- systemctl is-active containerd"},
      {"version-file", dir + "/version"},
      {"plugin-specs-file", ""},
      {"components", "-docker,-containerd"},
      {"skip-session-update-config", ""},
      {"session-protocol", "auto"},
      {"retention-period", "3h"},
      {"events-retention-period", "336h"},
      {"gpu-count", "0"},
      {"infiniband-expected-port-states", R"({"at_least_ports":1,"at_least_rate":100})"},
      {"infiniband-flap-auto-clear-window", "10m"},
      {"nvlink-expected-link-states", R"({"at_least_gpus_with_all_links_feature_enabled":8})"},
      {"nfs-checker-configs",
       R"([{"volume_path":")" + dir + R"(","dir_name":".gpud-nfs","file_contents":"ok"}])"},
      {"xid-reboot-threshold", "2"},
      {"xid-thresholds", R"({"overrides":{"94":{"rebootThreshold":1000}}})"},
      {"sxid-thresholds", R"({"overrides":{"11004":{"rebootThreshold":7}}})"},
      {"os-blocked-process-name-regexes", "^nvidia,^kworker"},
      {"os-blocked-process-persistence-threshold", "5"},
      {"xid-lookback-period", "72h"},
      {"sxid-lookback-period", "72h"},
      {"threshold-celsius-slowdown-margin", "10"},
      {"infiniband-exclude-devices", "mlx5_0,mlx5_1"},
      {"infiniband-class-root-dir", dir + "/infiniband"},
  };
}

TEST(GpudCompat, RunWithEveryGpudFlagServesAndWarnsOncePerKind) {
  TempDirGuard dir{make_temp_dir()};
  fs::create_directories(dir.path + "/infiniband");
  auto values = gpud_run_values(dir.path);
  std::vector<std::string> args;
  for (const app::GpudFlag& f : app::gpud_flags()) {
    if ((f.verbs & app::kGpudRun) == 0 || f.use == GpudFlagUse::kRefused) continue;
    const std::string name(f.name);
    if (name == "data-dir" || name == "listen-address") continue;  // DaemonProcess gives them
    // --retention-period and --metrics-retention-period are one flag: given once, by its old name.
    if (name == "metrics-retention-period") continue;
    auto it = values.find(name);
    ASSERT_NE(it, values.end()) << "no test value for GPUd's --" << name;
    if (f.takes_value) {
      args.insert(args.end(), {"--" + name, it->second});
    } else {
      args.push_back("--" + name + (it->second.empty() ? "" : "=" + it->second));
    }
  }
  DaemonProcess d(dir.path + "/data", args);
  ASSERT_TRUE(d.ready()) << d.log() << read_file(dir.path + "/gpud.log");
  auto states = d.get("/v1/states");
  ASSERT_TRUE(states);
  EXPECT_EQ(states->status, 200);
  EXPECT_TRUE(parse_json(states->body).is_array()) << states->body;
  EXPECT_EQ(d.stop(), 0);
  const std::string log = read_file(dir.path + "/gpud.log");
  EXPECT_EQ(count_of(log, "no managed control plane"), 1u) << log;
  EXPECT_EQ(count_of(log, "runs no findmnt"), 1u) << log;
  EXPECT_EQ(count_of(log, "not used by gpud yet"), 0u) << "every flag is implemented or ignored";
  EXPECT_NE(log.find("--enable-auto-update"), std::string::npos) << log;
}

// systemd splits FLAGS on blanks: GPUd's written line, with its README's auto-update opt-out.
TEST(GpudCompat, GpudsEnvironmentFileFlagsLineStartsTheDaemon) {
  TempDirGuard dir{make_temp_dir()};
  const std::string line = "--log-level=info --log-file=" + dir.path +
                           "/gpud.log --endpoint=gpud-manager-prod01.dgxc-lepton.nvidia.com "
                           "--db-in-memory --session-protocol=auto --enable-auto-update=false";
  std::vector<std::string> args;
  std::istringstream words(line);
  for (std::string w; words >> w;) args.push_back(w);
  DaemonProcess d(dir.path + "/data", args);
  ASSERT_TRUE(d.ready()) << d.log() << read_file(dir.path + "/gpud.log");
  EXPECT_EQ(d.get("/healthz")->status, 200);
  EXPECT_EQ(d.stop(), 0);
  const std::string log = read_file(dir.path + "/gpud.log");
  EXPECT_EQ(count_of(log, "no managed control plane"), 1u) << log;
}

TEST(GpudCompat, TestInjectorsAreRefusedByRunAndScanNamingTheScenario) {
  for (const char* verb : {"run", "scan"}) {
    auto r = run_gpud({verb, "--gpu-uuids-with-gpu-lost", "GPU-0"});
    EXPECT_EQ(r.exit_code, 2) << r.out;
    EXPECT_NE(r.out.find("testing/fixtures/nvml/h100x8-gpu-lost.json"), std::string::npos) << r.out;
  }
}

TEST(GpudCompat, ControlPlaneVerbsAnswerWithExitThreeWhateverFollows) {
  for (const auto& [args, says] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"login", "--token", "t", "--endpoint", "e"}, "nothing to log in to"},
           {{"notify", "startup", "--data-dir", "/tmp"}, "no managed control plane to notify"},
           {{"nt", "shutdown"}, "no managed control plane to notify"},
           {{"update", "check"}, "does not update itself"},
           {{"update", "--url", "https://example.com/gpud.tgz", "--next-version", "v1"},
            "does not update itself"},
           {{"release", "gen-key", "--root"}, "make deb"}}) {
    auto r = run_gpud(args);
    EXPECT_EQ(r.exit_code, 3) << args[0] << ": " << r.out;
    EXPECT_NE(r.out.find(says), std::string::npos) << r.out;
  }
}

TEST(GpudCompat, ScanAliasSRunsTheScan) {
  auto r = run_gpud({"s", "--components", "cpu", "--gpu-count", "0"});
  EXPECT_TRUE(r.exit_code == 0 || r.exit_code == 1) << r.out;
  EXPECT_NE(r.out.find("scan complete"), std::string::npos) << r.out;
}

TEST(GpudCompat, MachineInfoOutputFormat) {
  auto json = run_gpud({"machine-info", "--output-format", "json"});
  ASSERT_EQ(json.exit_code, 0) << json.out;
  EXPECT_TRUE(parse_json(json.out).is_object()) << json.out;
  auto plain = run_gpud({"machine-info", "--output-format=plain", "--log-level", "info"});
  ASSERT_EQ(plain.exit_code, 0) << plain.out;
  EXPECT_FALSE(parse_json(plain.out).is_object()) << plain.out;
  EXPECT_EQ(run_gpud({"machine-info", "--output-format", "yaml"}).exit_code, 2);
}

TEST(GpudCompat, MetadataListsKeysRebootHistoryAndSetsAKey) {
  TempDirGuard dir{make_temp_dir()};
  const std::string data = dir.path + "/data";
  EXPECT_EQ(run_gpud({"metadata", "--data-dir", data}).exit_code, 2) << "no database yet";
  {
    DaemonProcess d(data, {"--components", "os"});
    ASSERT_TRUE(d.ready()) << d.log();
    // The os component records this boot once the daemon has started.
    ASSERT_TRUE(eventually(
        [&] {
          auto r = run_gpud({"metadata", "--data-dir", data, "--reboot-history"});
          return r.exit_code == 0 && r.out.find("reboot history (0)") == std::string::npos;
        },
        std::chrono::seconds(20)));
    EXPECT_EQ(d.stop(), 0);
  }
  auto set = run_gpud({"metadata", "--data-dir", data, "--set-key", "team", "--set-value", "ml"});
  ASSERT_EQ(set.exit_code, 0) << set.out;
  EXPECT_NE(set.out.find("team: ml"), std::string::npos) << set.out;
  EXPECT_NE(set.out.find("successfully updated metadata"), std::string::npos) << set.out;
  auto json =
      run_gpud({"metadata", "--data-dir", data, "--output-format", "json", "--reboot-history"});
  ASSERT_EQ(json.exit_code, 0) << json.out;
  auto doc = parse_json(json.out);
  EXPECT_EQ(doc["metadata"].value("team", ""), "ml") << json.out;
  EXPECT_EQ(doc["metadata"].value("schema_version", ""), "2") << json.out;
  ASSERT_TRUE(doc["reboot_history"].is_array()) << json.out;
  ASSERT_FALSE(doc["reboot_history"].empty()) << json.out;
  EXPECT_FALSE(doc["reboot_history"][0].value("time_utc", "").empty()) << json.out;
  auto managed =
      run_gpud({"metadata", "--data-dir", data, "--set-key", "schema_version", "--set-value", "9"});
  EXPECT_EQ(managed.exit_code, 2) << managed.out;
  EXPECT_EQ(run_gpud({"metadata", "--data-dir", data, "--set-key", "k"}).exit_code, 2);
}

TEST(GpudCompat, DownResetStateRemovesTheDatabaseButNotWhileADaemonRuns) {
  TempDirGuard dir{make_temp_dir()};
  const std::string root = dir.path + "/root";
  const std::string data = dir.path + "/data";
  fs::create_directories(root);
  {
    DaemonProcess d(data, {"--components", "cpu"});
    ASSERT_TRUE(d.ready()) << d.log();
    auto busy = run_gpud({"down", "--root", root, "--reset-state", "--data-dir", data});
    EXPECT_EQ(busy.exit_code, 2) << busy.out;
    EXPECT_NE(busy.out.find("refusing to reset"), std::string::npos) << busy.out;
    EXPECT_TRUE(fs::exists(data + "/gpud.state"));
    EXPECT_EQ(d.stop(), 0);
  }
  auto down = run_gpud({"down", "--root", root, "--reset-state", "--data-dir", data, "-l", "info"});
  ASSERT_EQ(down.exit_code, 0) << down.out;
  EXPECT_NE(down.out.find("removed " + data + "/gpud.state"), std::string::npos) << down.out;
  EXPECT_FALSE(fs::exists(data + "/gpud.state"));
  auto again = run_gpud({"down", "--root", root, "--reset-state", "--data-dir", data});
  EXPECT_EQ(again.exit_code, 0) << again.out;
  EXPECT_NE(again.out.find("nothing to reset"), std::string::npos) << again.out;
}

// GPUd's README: `sudo gpud up --token <token>`. The login flags are up's own: warned, and never
// written into the service's configuration.
TEST(GpudCompat, UpAcceptsGpudsLoginFlagsAndKeepsThemOutOfTheService) {
  TempDirGuard dir{make_temp_dir()};
  auto up = run_gpud({"up", "--root", dir.path, "--token", "lepton-token", "--endpoint",
                      "gpud-manager-prod01.dgxc-lepton.nvidia.com", "--node-labels",
                      R"({"team":"ml"})", "--private-ip", "10.0.0.5", "--gpu-count", "8"});
  ASSERT_EQ(up.exit_code, 0) << up.out;
  EXPECT_EQ(count_of(up.out, "no managed control plane"), 1u) << up.out;
  const std::string yaml = read_file(dir.path + "/etc/gpud/gpud.yaml");
  EXPECT_NE(yaml.find("\ngpu-count: 8\n"), std::string::npos) << yaml;
  EXPECT_EQ(yaml.find("lepton-token"), std::string::npos) << yaml;
  EXPECT_EQ(yaml.find("\ntoken"), std::string::npos) << yaml;
}

// A node that ran GPUd: its state file sits where gpud's store goes. The first `gpud run` moves it
// to gpud.state.GPUd, imports its reboots, events and machine id, and serves them; the verb then
// finds nothing new, and refuses a file that is no database.
// This host's boot time (/proc/stat's btime), as the os component reads it.
std::optional<int64_t> host_boot_time() {
  std::ifstream in("/proc/stat");
  std::string key;
  int64_t value = 0;
  while (in >> key) {
    if (key == "btime" && in >> value) return value;
    in.ignore(std::numeric_limits<std::streamsize>::max(), '\n');
  }
  return std::nullopt;
}

// GPUd recorded this boot: gpud's os component, starting after the import, does not record it
// again.
TEST(GpudCompat, ABootGpudRecordedIsNotRecordedAgain) {
  const auto boot = host_boot_time();
  ASSERT_TRUE(boot.has_value());
  const int64_t now = to_unix_seconds(Clock::now());
  if (now - *boot > 13 * 86400) GTEST_SKIP() << "this host booted before the events retention";
  TempDirGuard dir{make_temp_dir()};
  const std::string data = dir.path + "/data";
  fs::create_directories(data);
  {
    gpud::testing::GpudStateFile f(data + "/gpud.state");
    f.event("os", *boot, "reboot", "Warning", "system reboot detected (GPUd's wording)");
  }
  DaemonProcess d(data, {"--components", "os"});
  ASSERT_TRUE(d.ready()) << d.log();
  auto res = d.get("/v1/events?components=os&startTime=" + std::to_string(*boot - 120));
  ASSERT_TRUE(res) << d.log();
  ASSERT_EQ(res->status, 200) << res->body;
  int reboots = 0;
  for (const auto& c : parse_json(res->body))
    for (const auto& e : c["events"]) reboots += e["name"] == "reboot" ? 1 : 0;
  EXPECT_EQ(reboots, 1) << res->body;
  EXPECT_NE(res->body.find("GPUd's wording"), std::string::npos) << res->body;
  EXPECT_EQ(d.stop(), 0);
}

TEST(GpudCompat, GpudsStateFileIsImportedAtTheFirstRunAndByTheVerb) {
  TempDirGuard dir{make_temp_dir()};
  const std::string data = dir.path + "/data";
  fs::create_directories(data);
  const int64_t now = to_unix_seconds(Clock::now());
  {
    gpud::testing::GpudStateFile f(data + "/gpud.state");
    f.event("os", now - 1800, "reboot", "Warning", "system reboot detected by GPUd");
    f.event("os", now - 40 * 86400, "reboot", "Warning", "older than the retention");
    f.metadata("machine_id", "gpud-e2e-node");
    f.metadata("token", "lepton-token");
  }
  const std::string text = dir.path + "/notes.txt";
  std::ofstream(text) << std::string(4096, 'n');
  auto not_db = run_gpud({"import-gpud-state", "--data-dir", data, "--from", text});
  EXPECT_EQ(not_db.exit_code, 2) << not_db.out;
  EXPECT_NE(not_db.out.find("not a readable SQLite database"), std::string::npos) << not_db.out;
  EXPECT_TRUE(fs::exists(data + "/gpud.state")) << "a refused import moves nothing";
  {
    DaemonProcess d(data, {"--components", "os"});
    ASSERT_TRUE(d.ready()) << d.log();
    auto res = d.get("/v1/events?components=os&startTime=" + std::to_string(now - 7200));
    ASSERT_TRUE(res) << d.log();
    ASSERT_EQ(res->status, 200) << res->body;
    EXPECT_NE(res->body.find("system reboot detected by GPUd"), std::string::npos) << res->body;
    EXPECT_EQ(res->body.find("older than the retention"), std::string::npos) << res->body;
    EXPECT_NE(d.log().find("imported 1 events (1 reboots) from GPUd's state file"),
              std::string::npos)
        << d.log();
    EXPECT_EQ(d.stop(), 0);
  }
  EXPECT_TRUE(fs::exists(data + "/gpud.state.GPUd"));
  auto meta = run_gpud({"metadata", "--data-dir", data, "--output-format", "json"});
  ASSERT_EQ(meta.exit_code, 0) << meta.out;
  auto doc = parse_json(meta.out);
  EXPECT_EQ(doc["metadata"].value("machine_id", ""), "gpud-e2e-node") << meta.out;
  EXPECT_FALSE(doc["metadata"].contains("token")) << meta.out;

  auto again = run_gpud({"import-gpud-state", "--data-dir", data, "--output-format", "json"});
  ASSERT_EQ(again.exit_code, 0) << again.out;
  auto report = parse_json(again.out);
  EXPECT_EQ(report.value("events_stored", -1), 0) << again.out;
  EXPECT_EQ(report["skipped"].value("older_than_retention", 0), 1) << again.out;
}

}  // namespace
}  // namespace gpud::e2e
