// End-to-end: `gpud run --config FILE` reads its flags from the YAML file, flags on the command line
// override it, and a key that is no flag stops the daemon with the key's name and line.
#include <gtest/gtest.h>

#include <fstream>

#include "tests/e2e/daemon_process.h"

namespace gpud::e2e {
namespace {

TEST(ConfigFileE2E, DaemonRunsWithTheFileAndTheCommandLineWins) {
  TempDirGuard dir{make_temp_dir()};
  const std::string config = dir.path + "/gpud.yaml";
  // The file's listen address is taken (port 1 needs root and is no test's): the command line's
  // --listen-address must win, or the daemon never answers.
  std::ofstream(config) << "listen-address: 127.0.0.1:1\n"
                           "components: [cpu, memory]\n"
                           "log_level: debug\n"
                           "xid-thresholds:\n"
                           "  overrides:\n"
                           "    \"94\": {rebootThreshold: 3}\n";
  DaemonProcess d(dir.path + "/data", {"--config", config}, false);
  ASSERT_TRUE(d.ready()) << d.log();
  auto r = d.get("/v1/components");
  ASSERT_TRUE(r);
  EXPECT_EQ(parse_json(r->body), nlohmann::json::array({"cpu", "memory"}));
  EXPECT_NE(d.log().find(" debug "), std::string::npos) << "log-level: debug\n" << d.log();
}

TEST(ConfigFileE2E, UnknownKeyStopsTheDaemonNamingIt) {
  TempDirGuard dir{make_temp_dir()};
  const std::string config = dir.path + "/gpud.yaml";
  std::ofstream(config) << "log-level: info\ngpu-cout: 8\n";
  auto r = run_gpud({"run", "--config", config, "--data-dir", dir.path + "/data"});
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.out.find(config + ":2: unknown key \"gpu-cout\""), std::string::npos) << r.out;
  auto missing = run_gpud({"scan", "--config", dir.path + "/absent.yaml"});
  EXPECT_EQ(missing.exit_code, 2) << missing.out;
  EXPECT_NE(missing.out.find("absent.yaml"), std::string::npos) << missing.out;
}

}  // namespace
}  // namespace gpud::e2e
