#include "app/options.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <tuple>

namespace gpud::app {
namespace {

namespace fs = std::filesystem;

class TokenFile {
 public:
  TokenFile(const std::string& text, mode_t mode) {
    std::string tmpl = (fs::temp_directory_path() / "gpud-token-XXXXXX").string();
    int fd = ::mkstemp(tmpl.data());
    ::close(fd);
    path_ = tmpl;
    std::ofstream(path_) << text;
    ::chmod(path_.c_str(), mode);
  }
  ~TokenFile() { ::unlink(path_.c_str()); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

TEST(AdminToken, NeedsSixteenPrintableCharactersThatSurviveHeadersAndEnvFiles) {
  EXPECT_TRUE(check_admin_token("0123456789abcdef"));
  EXPECT_TRUE(check_admin_token("A-z_0.9~+/=0123456789"));
  for (const char* bad : {"", "0123456789abcde", "0123456789 abcdef", "0123456789abcdef\"",
                          "0123456789abcdef$", "0123456789abcdef\n", "0123456789abcdef\\"})
    EXPECT_FALSE(check_admin_token(bad)) << bad;
}

TEST(AdminToken, ReadFromAFileOnlyItsOwnerCanRead) {
  TokenFile ok("  0123456789abcdef\n", 0600);
  auto token = read_admin_token_file(ok.path());
  ASSERT_TRUE(token) << token.error().message;
  EXPECT_EQ(*token, "0123456789abcdef");

  TokenFile world("0123456789abcdef\n", 0644);
  auto open = read_admin_token_file(world.path());
  ASSERT_FALSE(open);
  EXPECT_NE(open.error().message.find("chmod 600"), std::string::npos) << open.error().message;

  TokenFile empty("\n", 0600);
  EXPECT_FALSE(read_admin_token_file(empty.path()));
  EXPECT_FALSE(read_admin_token_file("/nonexistent/gpud-token"));
}

TEST(AdminToken, ComesFromTheFileOrTheEnvironmentButNotBoth) {
  TokenFile file("0123456789abcdef\n", 0600);
  EXPECT_EQ(resolve_admin_token("", nullptr).value_or("x"), "");
  EXPECT_EQ(resolve_admin_token("", "").value_or("x"), "");
  EXPECT_EQ(resolve_admin_token(file.path(), nullptr).value_or(""), "0123456789abcdef");
  EXPECT_EQ(resolve_admin_token("", "fedcba9876543210").value_or(""), "fedcba9876543210");
  auto both = resolve_admin_token(file.path(), "fedcba9876543210");
  ASSERT_FALSE(both);
  EXPECT_NE(both.error().message.find("one way"), std::string::npos) << both.error().message;
  auto weak = resolve_admin_token("", "short");
  ASSERT_FALSE(weak);
  EXPECT_NE(weak.error().message.find("GPUD_ADMIN_TOKEN"), std::string::npos);
}

TEST(RunFlags, TheApiSocketDefaultsIntoTheDataDirUnlessGiven) {
  RunFlags f;
  f.config.data_dir = "/var/lib/gpud";
  ASSERT_TRUE(finalize(f));
  EXPECT_EQ(f.config.api_socket, "/var/lib/gpud/run/gpud.sock");
  RunFlags none;
  none.config.data_dir = "/var/lib/gpud";
  none.api_socket_given = true;  // --api-socket ""
  ASSERT_TRUE(finalize(none));
  EXPECT_EQ(none.config.api_socket, "");
}

TEST(RunFlags, HostComponentFlagsReachTheConfig) {
  RunCommandLine run;
  ASSERT_TRUE(
      run.parse({"--systemd-units", "containerd, kubelet.service", "--network-latency-targets",
                 "10.0.0.1:443,[::1]:8080", "--network-latency-threshold", "250ms"}));
  ASSERT_TRUE(finalize(run.flags));
  const Config& c = run.flags.config;
  EXPECT_EQ(c.systemd_units, (std::vector<std::string>{"containerd", "kubelet.service"}));
  EXPECT_EQ(c.network_latency_targets, (std::vector<std::string>{"10.0.0.1:443", "[::1]:8080"}));
  EXPECT_EQ(c.network_latency_threshold, std::chrono::milliseconds(250));
  EXPECT_FALSE(c.executable_search_path.empty());
  RunFlags defaults;
  ASSERT_TRUE(finalize(defaults));
  EXPECT_TRUE(defaults.config.systemd_units.empty());
  EXPECT_TRUE(defaults.config.network_latency_targets.empty());
  EXPECT_EQ(defaults.config.network_latency_threshold, std::chrono::seconds(7));
}

TEST(RunFlags, KubeletReadOnlyPortIsOffUnlessGivenAndTheCaFileReachesTheConfig) {
  RunCommandLine defaults;
  ASSERT_TRUE(defaults.parse({}));
  EXPECT_EQ(defaults.flags.config.kubelet_read_only_port, 0);
  EXPECT_EQ(defaults.flags.config.kubelet_port, 10250);
  EXPECT_EQ(defaults.flags.config.kubelet_ca_file, "");
  RunCommandLine run;
  ASSERT_TRUE(run.parse(
      {"--kubelet-read-only-port", "10255", "--kubelet-ca-file", "/etc/kubernetes/pki/ca.crt"}));
  EXPECT_EQ(run.flags.config.kubelet_read_only_port, 10255);
  EXPECT_EQ(run.flags.config.kubelet_ca_file, "/etc/kubernetes/pki/ca.crt");
}

TEST(RunFlags, BadHostComponentFlagsAreRefusedWithTheFlagNamed) {
  for (auto [flag, value, message] :
       {std::tuple{"--network-latency-targets", "10.0.0.1", "invalid --network-latency-targets"},
        std::tuple{"--network-latency-threshold", "0s", "invalid --network-latency-threshold"},
        std::tuple{"--network-latency-threshold", "2m", "invalid --network-latency-threshold"},
        std::tuple{"--systemd-units", "a b", "invalid unit \"a b\" in --systemd-units"}}) {
    RunCommandLine run;
    ASSERT_TRUE(run.parse({flag, value}));
    auto r = finalize(run.flags);
    ASSERT_FALSE(r) << flag << " " << value;
    EXPECT_NE(r.error().message.find(message), std::string::npos) << r.error().message;
  }
}

// The Xid / SXid thresholds are parsed once, here, over Config's one default (94 -> 1000 for Xid).
TEST(RunFlags, XidThresholdsAreParsedIntoTheConfig) {
  RunFlags defaults;
  ASSERT_TRUE(finalize(defaults));
  EXPECT_EQ(defaults.config.xid_thresholds.threshold(94), 1000);
  EXPECT_EQ(defaults.config.xid_thresholds.threshold(79), 2);
  EXPECT_EQ(defaults.config.sxid_thresholds.threshold(12028), 2);
  RunCommandLine run;
  ASSERT_TRUE(run.parse({"--xid-reboot-threshold", "3", "--xid-thresholds",
                         R"({"overrides":{"79":{"rebootThreshold":7}}})", "--sxid-thresholds",
                         R"({"overrides":{"12028":{"rebootThreshold":4}}})"}));
  ASSERT_TRUE(finalize(run.flags));
  const Config& c = run.flags.config;
  EXPECT_EQ(c.xid_thresholds.threshold(79), 7);
  EXPECT_EQ(c.xid_thresholds.threshold(48), 3) << "--xid-reboot-threshold is the default";
  EXPECT_EQ(c.xid_thresholds.threshold(94), 1000) << "the default override stays";
  EXPECT_EQ(c.sxid_thresholds.threshold(12028), 4);
  EXPECT_EQ(c.sxid_thresholds.threshold(20034), 3);
  EXPECT_EQ(c.sxid_thresholds.threshold(94), 3);
}

TEST(RunFlags, BadXidThresholdsAreRefusedWithTheFlagNamed) {
  for (auto [flag, value, message] :
       {std::tuple{"--xid-thresholds", "{not json", "--xid-thresholds: invalid thresholds"},
        std::tuple{"--sxid-thresholds", R"({"overrides":{"x":{"rebootThreshold":1}}})",
                   "--sxid-thresholds: invalid thresholds: \"x\" is not a positive code"},
        std::tuple{"--xid-thresholds", R"({"overrides":{"79":{"rebootThreshold":0}}})",
                   "--xid-thresholds: invalid thresholds: code 79 needs"}}) {
    RunCommandLine run;
    ASSERT_TRUE(run.parse({flag, value}));
    auto r = finalize(run.flags);
    ASSERT_FALSE(r) << flag << " " << value;
    EXPECT_NE(r.error().message.find(message), std::string::npos) << r.error().message;
  }
}

}  // namespace
}  // namespace gpud::app
