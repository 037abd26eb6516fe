// The API server as its clients meet it: the commands docs/API.md shows, run verbatim (but for the
// port and the data dir) against a daemon.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <fstream>
#include <string>

#include "testing/connection_load.h"
#include "tests/e2e/daemon_process.h"

namespace gpud::e2e {
namespace {

using namespace std::chrono_literals;

// docs/API.md's set-healthy commands send a POST with neither a body nor Content-Length (curl's
// -X POST without --data); both must be answered at once.
TEST(ServerE2E, TheDocumentedSetHealthyCommandsAreAnsweredAtOnce) {
  const std::string dir = make_temp_dir();
  TempDirGuard guard{dir};
  std::ofstream(dir + "/token") << "e2e-admin-token-0123456789abcdef\n";
  ::chmod((dir + "/token").c_str(), 0600);
  // The fake NVML makes the Xid component apply whatever this machine's kernel log holds (without
  // NVML, a GPU on the bus or an Xid already seen it is hidden and set-healthy refuses it).
  DaemonProcess d(dir + "/data",
                  {"--components", "accelerator-nvidia-error-xid,cpu", "--admin-token-file",
                   dir + "/token", "--nvml-lib", GPUD_FAKE_NVML});
  ASSERT_TRUE(d.ready()) << d.log();
  const std::string query =
      "/v1/health-states/set-healthy?components=accelerator-nvidia-error-xid,cpu";
  const std::string commands[] = {
      "curl --unix-socket " + dir + "/data/run/gpud.sock -X POST \\\n  'http://localhost" + query +
          "'",
      "cd " + dir + " && curl --cacert " + dir +
          "/data/gpud.crt -H \"Authorization: Bearer $(cat token)\" -X POST \\\n  "
          "'https://localhost:" +
          std::to_string(d.port()) + query + "'",
  };
  for (const auto& cmd : commands) {
    auto start = std::chrono::steady_clock::now();
    // curl's progress meter (stderr) left out, the command itself as documented.
    auto r = shell("timeout 5 sh -c 'exec 2>/dev/null; " + [&] {
      std::string q;
      for (char c : cmd) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
      return q;
    }() + "'");
    auto elapsed = std::chrono::steady_clock::now() - start;
    EXPECT_EQ(r.exit_code, 0) << cmd << "\n" << r.out;
    EXPECT_LT(elapsed, 1s) << cmd << "\ntook "
                           << std::chrono::duration_cast<std::chrono::milliseconds>(elapsed).count()
                           << " ms";
    auto body = parse_json(r.out);
    ASSERT_TRUE(body.is_object()) << cmd << "\n" << r.out;
    EXPECT_EQ(body.value("message", ""), "set healthy states completed") << r.out;
    EXPECT_EQ(body["failed"].value("cpu", ""), "component does not support set-healthy") << r.out;
  }
  d.stop();
}

// The daemon stays reachable, and stops on SIGTERM within the 5 s systemd and Kubernetes allow,
// while 200 idle keep-alive clients, 50 whose request headers trickle in (a byte every 3 s) and 4
// that never send a byte are connected: once, 4 such connections took the API down and a SIGTERM
// left the daemon running 40 s later.
TEST(ServerE2E, HealthzAnswersAndSigtermStopsTheDaemonUnderStarvationLoad) {
  const std::string dir = make_temp_dir();
  TempDirGuard guard{dir};
  DaemonProcess d(dir + "/data", {"--components", "cpu"});
  ASSERT_TRUE(d.ready()) << d.log();
  testing::StarvationLoad load(d.port(), true);
  EXPECT_EQ(load.idle_ok(), 200u);
  EXPECT_EQ(load.slow_ok(), 50u);
  for (int i = 0; i < 3; ++i) {
    auto start = std::chrono::steady_clock::now();
    testing::TestConnection c(d.port(), true);
    ASSERT_TRUE(c.send(testing::kHealthzRequest));
    std::string res = c.read_response(2s);
    auto elapsed = std::chrono::steady_clock::now() - start;
    EXPECT_EQ(res.substr(0, 15), "HTTP/1.1 200 OK") << res;
    EXPECT_LT(elapsed, 100ms)
        << std::chrono::duration_cast<std::chrono::milliseconds>(elapsed).count() << " ms";
  }
  auto start = std::chrono::steady_clock::now();
  const int status = d.stop(SIGTERM, 5000);
  auto elapsed = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(status, 0) << d.log();
  EXPECT_LT(elapsed, 5s);
}

}  // namespace
}  // namespace gpud::e2e
