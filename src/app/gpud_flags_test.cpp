#include "app/gpud_flags.h"

#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "app/options.h"
#include "app/verbs.h"

namespace gpud::app {
namespace {

// The verbs as `gpud` builds them.
struct Cli {
  CLI::App app{"gpud", "gpud"};
  int exit_code = 0;
  std::function<void()> serve;
  Cli() {
    add_run(app, &exit_code, &serve);
    add_scan(app, &exit_code);
    add_up(app, &exit_code);
  }
  CLI::App* verb(const char* name) { return app.get_subcommand(name); }
};

std::string verbs_text(unsigned verbs) {
  std::string out;
  for (auto [bit, name] :
       {std::pair{kGpudRun, "run"}, std::pair{kGpudScan, "scan"}, std::pair{kGpudUp, "up"}})
    if ((verbs & bit) != 0) out += (out.empty() ? "" : ", ") + std::string(name);
  return out;
}

// Every GPUd flag is accepted where GPUd has it: `run` and `scan` parse it themselves, as their
// --help-all shows; `up` takes GPUd's login flags itself and hands the rest to `run`'s parser.
TEST(GpudFlags, EveryFlagOfRunScanAndUpIsAcceptedAndShownInHelp) {
  Cli cli;
  RunCommandLine run_line;  // what `up` validates its other flags with
  const std::string run_help = cli.verb("run")->help("", CLI::AppFormatMode::All);
  const std::string scan_help = cli.verb("scan")->help("", CLI::AppFormatMode::All);
  const std::string up_help = cli.verb("up")->help("", CLI::AppFormatMode::All);
  for (const GpudFlag& f : gpud_flags()) {
    const std::string name = "--" + std::string(f.name);
    if ((f.verbs & kGpudRun) != 0) {
      EXPECT_NE(cli.verb("run")->get_option_no_throw(name), nullptr) << "run " << name;
      EXPECT_NE(run_help.find(name), std::string::npos) << "run --help-all lacks " << name;
    }
    if ((f.verbs & kGpudScan) != 0) {
      EXPECT_NE(cli.verb("scan")->get_option_no_throw(name), nullptr) << "scan " << name;
      EXPECT_NE(scan_help.find(name), std::string::npos) << "scan --help-all lacks " << name;
    }
    if ((f.verbs & kGpudUp) != 0) {
      if (f.use == GpudFlagUse::kImplemented) {
        EXPECT_NE(run_line.app.get_option_no_throw(name), nullptr) << "up (as run) " << name;
      } else {
        EXPECT_NE(cli.verb("up")->get_option_no_throw(name), nullptr) << "up " << name;
        EXPECT_NE(up_help.find(name), std::string::npos) << "up --help-all lacks " << name;
      }
    }
  }
}

// docs/CLI.md's "GPUd's flags" table lists exactly GPUd's flags, each with its verbs and status.
TEST(GpudFlags, CliDocTableListsEveryGpudFlagWithItsVerbsAndStatus) {
  std::ifstream in(std::string(GPUD_SOURCE_DIR) + "/docs/CLI.md");
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string doc = ss.str();
  const size_t start = doc.find("\n## GPUd's flags");
  ASSERT_NE(start, std::string::npos) << "docs/CLI.md has no \"## GPUd's flags\" section";
  const size_t end = doc.find("\n## ", start + 1);
  std::istringstream section(doc.substr(start, end - start));
  static const std::regex kRow(R"(^\| `--([a-z0-9-]+)` \| ([a-z, ]+) \| ([a-z ]+) \|)");
  std::map<std::string, std::pair<std::string, std::string>> rows;
  for (std::string line; std::getline(section, line);) {
    std::smatch m;
    if (std::regex_search(line, m, kRow))
      EXPECT_TRUE(rows.emplace(m[1], std::pair{m[2].str(), m[3].str()}).second)
          << "listed twice: " << m[1];
  }
  std::set<std::string> listed, expected;
  for (const auto& [name, row] : rows) listed.insert(name);
  for (const GpudFlag& f : gpud_flags()) {
    expected.insert(std::string(f.name));
    auto it = rows.find(std::string(f.name));
    if (it == rows.end()) continue;
    EXPECT_EQ(it->second.first, verbs_text(f.verbs)) << f.name;
    EXPECT_EQ(it->second.second, use_name(f.use)) << f.name;
  }
  EXPECT_EQ(listed, expected);
}

// GPUd's default /etc/default/gpud FLAGS (pkg/gpud-manager/systemd) and its README's
// `--enable-auto-update=false` start `gpud run` unchanged: one warning line, no error.
TEST(GpudFlags, GpudsDefaultFlagsLineParsesWithOneControlPlaneWarning) {
  RunCommandLine line;
  ASSERT_TRUE(line.parse({"--log-level=info", "--log-file=/tmp/gpud.log",
                          "--endpoint=gpud-manager-prod01.dgxc-lepton.nvidia.com",
                          "--data-dir=/tmp/gpud-data", "--db-in-memory", "--session-protocol=auto",
                          "--enable-auto-update=false", "--auto-update-exit-code", "-1"}));
  const GpudFlagsGiven& given = line.flags.gpud_flags_given;
  EXPECT_EQ(std::set<std::string>(given.control_plane.begin(), given.control_plane.end()),
            (std::set<std::string>{"--endpoint", "--session-protocol", "--enable-auto-update",
                                   "--auto-update-exit-code"}));
  auto warnings = gpud_flag_warnings(given);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("no managed control plane"), std::string::npos) << warnings[0];
  EXPECT_NE(warnings[0].find("--endpoint"), std::string::npos) << warnings[0];
  EXPECT_EQ(line.flags.config.data_dir, "/tmp/gpud-data");
  EXPECT_TRUE(line.flags.config.db_in_memory);
  EXPECT_EQ(line.flags.config.log_file, "/tmp/gpud.log");
}

TEST(GpudFlags, EachKindGivenIsOneWarningLineAndNoneGivenIsNone) {
  EXPECT_TRUE(gpud_flag_warnings({}).empty());
  RunCommandLine line;
  ASSERT_TRUE(line.parse({"--pprof", "--token", "t", "--findmnt-commands",
                          "nsenter --target 1 --mount -- findmnt", "--lsblk-commands", "lsblk",
                          "--infiniband-flap-auto-clear-window", "10m"}));
  auto warnings = gpud_flag_warnings(line.flags.gpud_flags_given);
  ASSERT_EQ(warnings.size(), 2u);
  EXPECT_NE(warnings[1].find("--findmnt-commands, --lsblk-commands"), std::string::npos)
      << warnings[1];
  EXPECT_NE(warnings[1].find("--host-root"), std::string::npos) << warnings[1];
  // GPUd's flap window is gpud's own flag: no warning, its value used.
  EXPECT_EQ(line.flags.config.infiniband_flap_auto_clear_window, std::chrono::minutes(10));
  RunCommandLine bad;
  EXPECT_FALSE(bad.parse({"--infiniband-flap-auto-clear-window", "ten minutes"}));
}

TEST(GpudFlags, TestInjectorsAreRefusedNamingTheFakeNvmlScenario) {
  for (const auto& [args, scenario] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"--gpu-uuids-with-gpu-lost", "GPU-1"}, "h100x8-gpu-lost.json"},
           {{"--gpu-uuids-with-row-remapping-pending", "GPU-1"}, "h100x8-row-remap-pending.json"},
           {{"--nvml-device-get-devices-error"}, "nvmlDeviceGetHandleByIndex"},
           {{"--containerd-socket-missing"}, "--containerd-socket /nonexistent"}}) {
    RunCommandLine line;
    auto r = line.parse(args);
    ASSERT_FALSE(r) << args[0];
    EXPECT_NE(r.error().message.find(scenario), std::string::npos) << r.error().message;
    EXPECT_NE(r.error().message.find("test injector"), std::string::npos) << r.error().message;
  }
}

TEST(GpudFlags, ImplementedAliasesAndValuesTakeGpudsMeaning) {
  RunCommandLine line;
  ASSERT_TRUE(line.parse({"--retention-period", "5h", "--nfs-host-root", "/proc/1/root",
                          "--os-blocked-process-persistence-threshold", "3", "--components", "none",
                          "--log-level", "fatal", "--os-blocked-process-name-regexes",
                          "^nvidia,^kworker"}));
  ASSERT_TRUE(validate_run_flags(line.flags, line.sample)) << "none is GPUd's empty selection";
  EXPECT_EQ(line.flags.config.metrics_retention, std::chrono::hours(5));
  EXPECT_EQ(line.flags.config.nfs_host_root, "/proc/1/root");
  EXPECT_EQ(line.flags.config.os_blocked_process_persistence, 3);
  EXPECT_EQ(line.flags.config.os_blocked_process_name_regexes,
            (std::vector<std::string>{"^nvidia", "^kworker"}));
  RunCommandLine bad;
  EXPECT_FALSE(bad.parse({"--os-blocked-process-name-regexes", "(unclosed"}));
  EXPECT_TRUE(setup_logging("fatal", "")) << "zap's fatal is spdlog's critical";
  EXPECT_TRUE(setup_logging("info", ""));
}

}  // namespace
}  // namespace gpud::app
