// `gpud up` / `gpud down` against a staged root, the sd_notify readiness protocol, the service line
// of `gpud status`, and the daemon's log file.
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstddef>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "tests/e2e/daemon_process.h"

namespace fs = std::filesystem;

namespace gpud::e2e {
namespace {

std::string slurp(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string find_program(const std::string& name) {
  auto r = shell("command -v " + name);
  if (r.exit_code != 0) return "";
  while (!r.out.empty() && r.out.back() == '\n') r.out.pop_back();
  return r.out;
}

TEST(ServiceUp, StagesBinaryConfigEnvFileAndUnitThatSystemdAccepts) {
  std::string root = make_temp_dir();
  auto up = run_gpud({"up", "--root", root, "--gpu-count", "8", "--log-level", "debug"});
  ASSERT_EQ(up.exit_code, 0) << up.out;
  EXPECT_NE(up.out.find("staged under " + root), std::string::npos) << up.out;

  fs::path bin = fs::path(root) / "usr/local/bin/gpud";
  fs::path unit = fs::path(root) / "etc/systemd/system/gpud.service";
  fs::path env = fs::path(root) / "etc/default/gpud";
  ASSERT_TRUE(fs::exists(bin) && fs::exists(unit) && fs::exists(env)) << up.out;
  EXPECT_EQ(fs::file_size(bin), fs::file_size(GPUD_BINARY));
  // The unit is the shipped file, byte for byte.
  EXPECT_EQ(slurp(unit), slurp(fs::path(GPUD_SOURCE_DIR) / "deploy/systemd/gpud.service"));
  EXPECT_NE(slurp(env).find("\nFLAGS=\"\"\n"), std::string::npos) << slurp(env);
  // The flags are in the configuration file, which the staged binary reads as `gpud run` would.
  fs::path config = fs::path(root) / "etc/gpud/gpud.yaml";
  const std::string yaml = slurp(config);
  EXPECT_NE(yaml.find("\ngpu-count: 8\n"), std::string::npos) << yaml;
  EXPECT_NE(yaml.find("\nlog-level: debug\n"), std::string::npos) << yaml;
  // The staged binary runs.
  auto v = shell(bin.string() + " version");
  EXPECT_EQ(v.exit_code, 0) << v.out;
  EXPECT_NE(v.out.find("gpud "), std::string::npos) << v.out;

  // Running up again with the same flags changes nothing.
  auto again = run_gpud({"up", "--root", root, "--gpu-count", "8", "--log-level", "debug"});
  EXPECT_EQ(again.exit_code, 0) << again.out;
  EXPECT_NE(again.out.find("unchanged " + unit.string()), std::string::npos) << again.out;

  // systemd-analyze verify resolves ExecStart inside the staged root; it needs the stock units
  // (sysinit.target, ...) there too.
  std::string analyze = find_program("systemd-analyze");
  fs::path units;
  for (const char* d : {"/usr/lib/systemd/system", "/lib/systemd/system"})
    if (fs::exists(fs::path(d) / "multi-user.target")) {
      units = d;
      break;
    }
  if (!analyze.empty() && !units.empty()) {
    fs::create_directories(fs::path(root) / "usr/lib/systemd");
    fs::copy(units, fs::path(root) / "usr/lib/systemd/system",
             fs::copy_options::recursive | fs::copy_options::copy_symlinks);
    auto verify = shell(analyze + " --root=" + root + " verify gpud.service");
    EXPECT_EQ(verify.exit_code, 0) << verify.out;
    EXPECT_EQ(verify.out, "") << verify.out;
    // And it would notice a broken ExecStart: the check is real.
    fs::remove(bin);
    auto broken = shell(analyze + " --root=" + root + " verify gpud.service");
    EXPECT_NE(broken.exit_code, 0) << broken.out;
    EXPECT_NE(broken.out.find("/usr/local/bin/gpud"), std::string::npos) << broken.out;
  }

  auto down = run_gpud({"down", "--purge", "--root", root});
  EXPECT_EQ(down.exit_code, 0) << down.out;
  EXPECT_FALSE(fs::exists(unit)) << down.out;
  EXPECT_FALSE(fs::exists(env)) << down.out;
  fs::remove_all(root);
  if (analyze.empty() || units.empty())
    GTEST_SKIP() << "systemd-analyze or the stock systemd units are missing; unit not verified";
}

TEST(ServiceUp, RejectsFlagsRunWouldReject) {
  std::string root = make_temp_dir();
  auto unknown = run_gpud({"up", "--root", root, "--no-such-flag"});
  EXPECT_EQ(unknown.exit_code, 2) << unknown.out;
  EXPECT_NE(unknown.out.find("--no-such-flag"), std::string::npos) << unknown.out;
  auto dollar = run_gpud({"up", "--root", root, "--admin-token", "$SECRET"});
  EXPECT_EQ(dollar.exit_code, 2) << dollar.out;
  auto config = run_gpud({"up", "--root", root, "--config", "/x.yaml"});
  EXPECT_EQ(config.exit_code, 2) << "up writes /etc/gpud/gpud.yaml itself: " << config.out;
  auto no_root = run_gpud({"up", "--root", root + "/missing"});
  EXPECT_EQ(no_root.exit_code, 2) << no_root.out;
  EXPECT_NE(no_root.out.find("not a directory"), std::string::npos) << no_root.out;
  EXPECT_FALSE(fs::exists(fs::path(root) / "etc"));  // nothing written on a rejected call
  fs::remove_all(root);
}

// Flags that FLAGS="..." in /etc/default/gpud could not hold (spaces, quotes, JSON) are kept in the
// configuration file, where the daemon reads them back unchanged.
TEST(ServiceUp, KeepsFlagsWithSpacesAndJsonInTheConfigurationFile) {
  TempDirGuard root{make_temp_dir()};
  const std::string json = R"({"overrides":{"94":{"rebootThreshold":3}}})";
  auto up = run_gpud({"up", "--root", root.path, "--files", "/a b,/c\"d", "--xid-thresholds", json});
  ASSERT_EQ(up.exit_code, 0) << up.out;
  const std::string config = root.path + "/etc/gpud/gpud.yaml";
  const std::string yaml = read_file(config);
  EXPECT_NE(yaml.find("rebootThreshold: 3"), std::string::npos) << yaml;
  // The staged file is valid for `gpud run`/`scan`, and a bad one is refused by the same binary.
  auto scan = run_gpud({"scan", "--config", config, "--components", "file", "--log-level", "error"});
  EXPECT_NE(scan.out.find("/a b"), std::string::npos) << scan.out;
  EXPECT_NE(scan.out.find("/c\"d"), std::string::npos) << scan.out;
  // `up` without flags keeps it; `down` leaves it.
  auto again = run_gpud({"up", "--root", root.path});
  ASSERT_EQ(again.exit_code, 0) << again.out;
  EXPECT_NE(again.out.find("kept " + config), std::string::npos) << again.out;
  EXPECT_EQ(read_file(config), yaml);
  auto down = run_gpud({"down", "--purge", "--root", root.path});
  EXPECT_EQ(down.exit_code, 0) << down.out;
  EXPECT_EQ(read_file(config), yaml);
}

TEST(ServiceUp, UpAndDownRefuseWithoutSystemdAsPid1) {
  if (fs::is_directory("/run/systemd/system"))
    GTEST_SKIP() << "systemd is PID 1 here; refusing cannot be tested without touching the system";
  for (const char* verb : {"up", "down"}) {
    auto r = run_gpud({verb});
    EXPECT_EQ(r.exit_code, 2) << verb << ": " << r.out;
    // As root the refusal names systemd; otherwise it names root first.
    EXPECT_TRUE(r.out.find("needs systemd as PID 1") != std::string::npos ||
                r.out.find("must run as root") != std::string::npos)
        << verb << ": " << r.out;
  }
}

TEST(ServiceStatus, StatusReportsTheServiceState) {
  auto r = run_gpud({"status", "--server", "https://127.0.0.1:" + std::to_string(free_port())});
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find("service: gpud.service "), std::string::npos) << r.out;
  if (!fs::is_directory("/run/systemd/system")) {
    EXPECT_NE(r.out.find("service: gpud.service systemd not running"), std::string::npos) << r.out;
  }
}

TEST(ServiceStatus, StatusJsonCarriesServiceAndStates) {
  std::string dir = make_temp_dir();
  DaemonProcess d(dir + "/data", {"--components", "cpu"}, false);
  ASSERT_TRUE(d.ready()) << d.log();
  auto r = run_gpud({"status", "--json", "--server", d.url()});
  auto doc = parse_json(r.out);
  ASSERT_TRUE(doc.is_object()) << r.out;
  EXPECT_EQ(doc["service"]["name"], "gpud.service") << r.out;
  EXPECT_TRUE(doc["service"]["state"].is_string()) << r.out;
  ASSERT_TRUE(doc["states"].is_array()) << r.out;
  EXPECT_EQ(doc["states"].size(), 1u) << r.out;
  d.stop();
  fs::remove_all(dir);
}

// A unix datagram socket in the abstract namespace, like systemd's notification socket.
class NotifySocket {
 public:
  explicit NotifySocket(const std::string& name) {
    fd_ = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::memcpy(addr.sun_path + 1, name.data() + 1, name.size() - 1);
    auto len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + name.size());
    bound_ = ::bind(fd_, reinterpret_cast<sockaddr*>(&addr), len) == 0;
  }
  ~NotifySocket() { ::close(fd_); }
  bool bound() const { return bound_; }
  std::string receive(int timeout_ms) {
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, timeout_ms) != 1) return "";
    char buf[1024];
    ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
    return n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
  }

 private:
  int fd_ = -1;
  bool bound_ = false;
};

TEST(ServiceNotify, DaemonSendsReadyWhenListeningAndStoppingOnSigterm) {
  std::string name = "@gpud-e2e-notify-" + std::to_string(::getpid());
  NotifySocket sock(name);
  ASSERT_TRUE(sock.bound());
  std::string dir = make_temp_dir();
  DaemonProcess d(dir + "/data", {"--components", "cpu"}, false, {"NOTIFY_SOCKET=" + name});
  ASSERT_TRUE(d.ready()) << d.log();
  std::string ready = sock.receive(10000);
  EXPECT_NE(ready.find("READY=1"), std::string::npos) << ready;
  EXPECT_NE(ready.find("MAINPID=" + std::to_string(d.pid())), std::string::npos) << ready;
  // READY=1 comes after the API listens: the daemon already answered /healthz above, and the
  // message is not sent twice.
  EXPECT_EQ(sock.receive(200), "");
  EXPECT_EQ(d.stop(SIGTERM, 10000), 0) << d.log();
  std::string stopping = sock.receive(5000);
  EXPECT_NE(stopping.find("STOPPING=1"), std::string::npos) << stopping;
  fs::remove_all(dir);
}

TEST(ServiceLogs, LogFileLinesNameTheirComponent) {
  std::string dir = make_temp_dir();
  fs::path log = fs::path(dir) / "logs" / "gpud.log";
  {
    DaemonProcess d(dir + "/data", {"--log-file", log.string(), "--log-level", "debug"}, false);
    ASSERT_TRUE(d.ready()) << d.log();
    ASSERT_TRUE(d.get("/v1/states"));
    EXPECT_EQ(d.stop(SIGTERM, 10000), 0) << d.log();
  }
  std::string text = slurp(log);
  ASSERT_FALSE(text.empty());
  std::regex line_re(R"(^\S+ (trace|debug|info|warning|error|critical) \[[a-z0-9-]+\] .*)");
  std::stringstream in(text);
  std::string line;
  int lines = 0;
  while (std::getline(in, line)) {
    ++lines;
    EXPECT_TRUE(std::regex_match(line, line_re)) << line;
  }
  EXPECT_GT(lines, 2);
  EXPECT_NE(text.find(" [daemon] "), std::string::npos) << text;
  EXPECT_NE(text.find(" [server] "), std::string::npos) << text;
  fs::remove_all(dir);
}

TEST(ServiceLogs, BadLogFlagsAreRejected) {
  std::string dir = make_temp_dir();
  auto r = run_gpud(
      {"run", "--data-dir", dir, "--log-file", dir + "/x.log", "--log-file-max-size-mb", "0"});
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.out.find("--log-file-max-size-mb"), std::string::npos) << r.out;
  fs::remove_all(dir);
}

}  // namespace
}  // namespace gpud::e2e
