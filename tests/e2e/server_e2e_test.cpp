// The API server as its clients meet it: the commands docs/API.md shows, run verbatim (but for the
// port and the data dir) against a daemon.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <fstream>
#include <string>

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
  DaemonProcess d(dir + "/data", {"--components", "accelerator-nvidia-error-xid,cpu",
                                  "--admin-token-file", dir + "/token"});
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

}  // namespace
}  // namespace gpud::e2e
