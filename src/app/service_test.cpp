#include "app/service.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "app/config_file.h"

namespace fs = std::filesystem;

namespace gpud::app {
namespace {

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string temp_dir() {
  std::string tmpl = (fs::temp_directory_path() / "gpud-service-test-XXXXXX").string();
  return ::mkdtemp(tmpl.data()) != nullptr ? tmpl : "";
}

// The lines of a unit that are not comments.
std::string directives(const std::string& unit) {
  std::stringstream in(unit);
  std::string line, out;
  while (std::getline(in, line))
    if (!line.empty() && line[0] != '#') out += line + "\n";
  return out;
}

TEST(ServiceUnit, IsANotifyServiceThatRestartsAndRunsTheGivenBinary) {
  std::string unit = directives(render_unit("/usr/bin/gpud"));
  EXPECT_NE(unit.find("\nExecStart=/usr/bin/gpud run $FLAGS\n"), std::string::npos) << unit;
  EXPECT_EQ(unit.find("/usr/local/bin/gpud"), std::string::npos) << unit;
  for (const char* want : {"Type=notify\n", "Restart=always\n", "RestartSec=5\n",
                           "LimitNOFILE=65536\n", "EnvironmentFile=-/etc/default/gpud\n",
                           "WantedBy=multi-user.target\n", "NoNewPrivileges=yes\n"})
    EXPECT_NE(unit.find(want), std::string::npos) << want << "\n" << unit;
  std::string local = directives(render_unit(kInstalledBinary));
  EXPECT_NE(local.find("\nExecStart=/usr/local/bin/gpud run $FLAGS\n"), std::string::npos);
}

TEST(ServiceUnit, HardeningLeavesKernelLogProcSysAndGpuDevicesReachable) {
  std::string unit = directives(render_unit(kInstalledBinary));
  // Each of these hides /dev/kmsg, /dev/nvidia*, /proc or /sys (or restricts devices).
  for (const char* banned :
       {"PrivateDevices=", "ProtectKernelLogs=", "ProtectKernelTunables=", "ProtectProc=",
        "DevicePolicy=", "DeviceAllow=", "ProtectClock=", "InaccessiblePaths=", "ProcSubset="})
    EXPECT_EQ(unit.find(banned), std::string::npos) << banned << "\n" << unit;
}

TEST(ServiceEnvFile, FlagsLineIsEmptyTheFlagsLiveInTheConfigurationFile) {
  auto empty = render_env_file();
  ASSERT_TRUE(empty);
  EXPECT_NE(empty->find("\nFLAGS=\"\"\n"), std::string::npos) << *empty;
  EXPECT_NE(empty->find("/etc/gpud/gpud.yaml"), std::string::npos) << *empty;
}

TEST(ServiceEnvFile, KeepsTheAdminTokenOutOfFlagsAndTheUnit) {
  const std::string token = "0123456789abcdef0123";
  auto text = render_env_file(token);
  ASSERT_TRUE(text) << text.error().message;
  EXPECT_NE(text->find("\nGPUD_ADMIN_TOKEN=\"" + token + "\"\n"), std::string::npos) << *text;
  EXPECT_NE(text->find("\nFLAGS=\"\"\n"), std::string::npos) << *text;
  EXPECT_EQ(admin_token_in_env_file(*text), token);
  EXPECT_EQ(admin_token_in_env_file(*render_env_file()), "") << "the template's example counts";
  EXPECT_EQ(admin_token_in_env_file("GPUD_ADMIN_TOKEN=bare0123456789ab\n"), "bare0123456789ab");
  // The unit passes only $FLAGS on the command line; the token reaches the daemon as environment.
  std::string unit = directives(render_unit(kInstalledBinary));
  EXPECT_NE(unit.find("EnvironmentFile=-/etc/default/gpud\n"), std::string::npos);
  EXPECT_EQ(unit.find("TOKEN"), std::string::npos) << unit;
  EXPECT_FALSE(render_env_file("short")) << "a token under 16 characters";
  EXPECT_FALSE(render_env_file("0123456789abcdef\"x")) << "a token that breaks the quoting";
}

TEST(ServiceFlags, AdminTokenOnTheCommandLineIsRefusedWithWhereItGoes) {
  auto r = validate_daemon_flags({"--admin-token", "0123456789abcdef0123"});
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("--admin-token-file"), std::string::npos) << r.error().message;
  EXPECT_NE(r.error().message.find("GPUD_ADMIN_TOKEN"), std::string::npos) << r.error().message;
  EXPECT_TRUE(validate_daemon_flags({"--admin-token-file", "/etc/gpud/admin-token"}));
  EXPECT_TRUE(validate_daemon_flags({"--enable-fault-injection", "--api-socket", "/run/g.sock"}));
}

TEST(ServiceFiles, UpKeepsAnAdminTokenWhenOnlyTheFlagsChange) {
  std::string root = temp_dir();
  std::string exe = root + "/fake-gpud";
  std::ofstream(exe) << "#!/bin/sh\n";
  const std::string token = "0123456789abcdef0123";
  std::vector<std::string> log;
  ASSERT_TRUE(install_service_files(root, exe, {}, token, &log));
  const std::string env = root + "/etc/default/gpud";
  EXPECT_EQ(admin_token_in_env_file(slurp(env)), token);
  struct stat st {};
  ASSERT_EQ(::stat(env.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0077, 0040u) << "the environment file is open to others";
  for (const auto& line : log) EXPECT_EQ(line.find(token), std::string::npos) << line;

  auto flags = install_service_files(root, exe, {"--gpu-count", "8"}, "", &log);
  ASSERT_TRUE(flags);
  EXPECT_TRUE(*flags);
  EXPECT_EQ(admin_token_in_env_file(slurp(env)), token);
  EXPECT_NE(slurp(root + "/etc/gpud/gpud.yaml").find("\ngpu-count: 8\n"), std::string::npos);
  const std::string other = "fedcba9876543210fedc";
  ASSERT_TRUE(install_service_files(root, exe, {"--gpu-count", "8"}, other, &log));
  EXPECT_EQ(admin_token_in_env_file(slurp(env)), other);
  fs::remove_all(root);
}

TEST(ServiceFlags, ValidatedAsGpudRunParsesThem) {
  EXPECT_TRUE(validate_daemon_flags({}));
  EXPECT_TRUE(validate_daemon_flags({"--gpu-count", "8", "--no-tls", "--log-level", "debug"}));
  auto unknown = validate_daemon_flags({"--no-such-flag"});
  ASSERT_FALSE(unknown);
  EXPECT_NE(unknown.error().message.find("--no-such-flag"), std::string::npos)
      << unknown.error().message;
  EXPECT_FALSE(validate_daemon_flags({"--events-retention-period", "soon"}));
  EXPECT_FALSE(validate_daemon_flags({"--components", "no-such-component"}));
  EXPECT_FALSE(validate_daemon_flags({"--log-file-max-files", "0"}));
}

// A retention of 1000 years once wrapped "now - retention" into the future: the Xid component read
// Healthy over a stored Xid 79 and the metric history was purged at every sample.
TEST(ServiceFlags, DurationsOverOneHundredYearsAreRefused) {
  for (const char* flag : {"--events-retention-period", "--metrics-retention-period",
                           "--xid-lookback-period", "--sxid-lookback-period"}) {
    auto r = validate_daemon_flags({flag, "8760000h"});
    ASSERT_FALSE(r) << flag;
    EXPECT_NE(r.error().message.find("100 years"), std::string::npos) << r.error().message;
    EXPECT_TRUE(validate_daemon_flags({flag, "876000h"})) << flag;
  }
}

TEST(ServiceFlags, TlsSansAndTheMetricsListenerAreCheckedAtStart) {
  EXPECT_TRUE(validate_daemon_flags({"--tls-san", "gpu-7.example", "--tls-san", "10.0.0.7",
                                     "--metrics-listen-address", ":9400"}));
  auto comma = validate_daemon_flags({"--tls-san", "a,IP:10.0.0.1"});
  ASSERT_FALSE(comma);
  EXPECT_NE(comma.error().message.find("--tls-san"), std::string::npos) << comma.error().message;
  auto addr = validate_daemon_flags({"--metrics-listen-address", "9400"});
  ASSERT_FALSE(addr);
  EXPECT_NE(addr.error().message.find("--metrics-listen-address"), std::string::npos)
      << addr.error().message;
}

TEST(ServiceFiles, InstallIntoAStagedRootIsIdempotentAndPurgeRemovesUnitAndEnv) {
  std::string root = temp_dir();
  ASSERT_FALSE(root.empty());
  std::string exe = root + "/fake-gpud";
  {
    std::ofstream out(exe);
    out << "#!/bin/sh\necho fake\n";
  }
  std::vector<std::string> log;
  auto first = install_service_files(root, exe, {"--gpu-count", "8"}, "", &log);
  ASSERT_TRUE(first) << first.error().message;
  EXPECT_TRUE(*first);
  EXPECT_EQ(slurp(root + "/usr/local/bin/gpud"), "#!/bin/sh\necho fake\n");
  struct stat st {};
  ASSERT_EQ(::stat((root + "/usr/local/bin/gpud").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0755u);
  EXPECT_EQ(slurp(root + "/etc/systemd/system/gpud.service"), render_unit(kInstalledBinary));
  EXPECT_EQ(slurp(root + "/etc/default/gpud"), *render_env_file());
  const std::string config = root + "/etc/gpud/gpud.yaml";
  EXPECT_EQ(slurp(config), *render_config_yaml({"--gpu-count", "8"}));

  // Same input: nothing changes. No flags: the existing configuration is kept.
  log.clear();
  auto again = install_service_files(root, exe, {"--gpu-count", "8"}, "", &log);
  ASSERT_TRUE(again);
  EXPECT_FALSE(*again);
  auto keep = install_service_files(root, exe, {}, "", &log);
  ASSERT_TRUE(keep);
  EXPECT_FALSE(*keep);
  EXPECT_NE(slurp(config).find("\ngpu-count: 8\n"), std::string::npos);
  auto other = install_service_files(root, exe, {"--no-tls"}, "", &log);
  ASSERT_TRUE(other);
  EXPECT_TRUE(*other);
  EXPECT_NE(slurp(config).find("\nno-tls: true\n"), std::string::npos) << slurp(config);
  EXPECT_EQ(slurp(config).find("\ngpu-count:"), std::string::npos) << "new flags replace the old";

  log.clear();
  ASSERT_TRUE(remove_service_files(root, &log));
  EXPECT_FALSE(fs::exists(root + "/etc/systemd/system/gpud.service"));
  EXPECT_FALSE(fs::exists(root + "/etc/default/gpud"));
  EXPECT_TRUE(fs::exists(root + "/usr/local/bin/gpud"));  // the binary stays
  EXPECT_TRUE(fs::exists(config));                        // and the configuration
  // Purging twice is fine.
  EXPECT_TRUE(remove_service_files(root, &log));
  fs::remove_all(root);
}

TEST(ServiceFiles, UnreadableBinaryIsAnError) {
  std::string root = temp_dir();
  std::vector<std::string> log;
  auto r = install_service_files(root, root + "/missing-binary", {}, "", &log);
  EXPECT_FALSE(r);
  fs::remove_all(root);
}

TEST(ServiceState, DescribesWhatStatusPrints) {
  EXPECT_EQ(describe_service(false, kUnitPath, "", ""), "systemd not running");
  EXPECT_EQ(describe_service(true, "", "", ""), "not installed");
  EXPECT_EQ(describe_service(true, kUnitPath, "active", "enabled"), "active (enabled)");
  EXPECT_EQ(describe_service(true, kUnitPath, "failed", "disabled"), "failed (disabled)");
  std::string root = temp_dir();
  EXPECT_FALSE(systemd_running(root));
  fs::create_directories(root + "/run/systemd/system");
  EXPECT_TRUE(systemd_running(root));
  fs::remove_all(root);
}

}  // namespace
}  // namespace gpud::app
