// The whole /metrics exposition against a checked-in file, as node_exporter keeps one: the daemon
// on the fake NVML (eight healthy H100s) and a recorded host root, every value masked. A renamed
// metric, label or HELP text, a series that appears or vanishes, shows up here and in review.
//
// After an intended change: GPUD_UPDATE_GOLDEN=1 build/gpud_e2e_tests
// --gtest_filter='MetricsGolden*' rewrites tests/e2e/testdata/metrics.golden.txt; commit it with
// the change.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "tests/e2e/daemon_process.h"

namespace gpud::e2e {
namespace {

using namespace std::chrono_literals;

const std::string kGolden = std::string(GPUD_SOURCE_DIR) + "/tests/e2e/testdata/metrics.golden.txt";

// Comment lines as they are; each sample's value replaced by <v>.
std::string masked(const std::string& exposition) {
  std::istringstream in(exposition);
  std::string line, out;
  while (std::getline(in, line)) {
    if (!line.empty() && line[0] != '#') {
      const size_t sp = line.rfind(' ');
      if (sp != std::string::npos) line = line.substr(0, sp) + " <v>";
    }
    out += line + "\n";
  }
  return out;
}

// Lines of `a` that `b` lacks, marked with `mark`.
std::string missing_lines(const std::string& a, const std::string& b, char mark) {
  std::istringstream ia(a);
  std::string line, out;
  while (std::getline(ia, line))
    if (("\n" + b).find("\n" + line + "\n") == std::string::npos) out += mark + line + "\n";
  return out;
}

TEST(MetricsGolden, FakeH100NodeExpositionMatchesTheCheckedInFile) {
  const std::string dir = make_temp_dir();
  ASSERT_FALSE(dir.empty());
  const std::string kmsg = dir + "/kmsg";
  { std::ofstream(kmsg).flush(); }
  const std::string src = GPUD_SOURCE_DIR;
  DaemonProcess d(
      dir + "/data",
      // tailscale, containerd and docker are found through $PATH rather than the host root: left
      // out, so that a machine with any of them installed renders the same exposition.
      {"--nvml-lib", GPUD_FAKE_NVML, "--host-root", src + "/testing/fixtures/host-os/real",
       "--nvidia-check-interval", "1s", "--metrics-sample-interval", "1s", "--components",
       "-tailscale,-containerd,-docker"},
      false,
      {"FAKE_NVML_SCENARIO=" + src + "/testing/fixtures/nvml/h100x8-healthy.json",
       "GPUD_KMSG_PATH=" + kmsg});
  ASSERT_TRUE(d.ready()) << d.log();

  // The exposition is complete once every component has finished a check, the housekeeping pass
  // has run (gpud_sqlite_db_size_bytes), and two scrapes a second apart list the same series.
  auto settled = [&] {
    auto states = d.get("/v1/states");
    if (!states || states->status != 200 ||
        states->body.find("\"Initializing\"") != std::string::npos)
      return std::string();
    auto m = d.get("/metrics");
    if (!m || m->status != 200 || m->body.find("\ngpud_sqlite_db_size_bytes ") == std::string::npos)
      return std::string();
    return masked(m->body);
  };
  std::string previous, now;
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  while (std::chrono::steady_clock::now() < deadline) {
    now = settled();
    if (!now.empty() && now == previous) break;
    previous = now;
    std::this_thread::sleep_for(1s);
  }
  ASSERT_FALSE(now.empty()) << "the daemon never settled\n" << d.log();
  ASSERT_EQ(now, previous) << "two scrapes a second apart still differ after 60 s";
  EXPECT_EQ(d.stop(), 0) << d.log();
  std::filesystem::remove_all(dir);

  const char* update = std::getenv("GPUD_UPDATE_GOLDEN");
  if (update != nullptr && std::string(update) == "1") {
    std::ofstream(kGolden) << now;
    GTEST_SKIP() << "wrote " << kGolden << "; review and commit it";
  }
  const std::string golden = read_file(kGolden);
  ASSERT_FALSE(golden.empty()) << kGolden << " is missing: run with GPUD_UPDATE_GOLDEN=1";
  EXPECT_TRUE(now == golden) << "/metrics differs from " << kGolden
                             << " (- only in the file, + only in the daemon's output):\n"
                             << missing_lines(golden, now, '-') << missing_lines(now, golden, '+')
                             << "If the change is intended: GPUD_UPDATE_GOLDEN=1 "
                                "build/gpud_e2e_tests --gtest_filter='MetricsGolden*'";
}

}  // namespace
}  // namespace gpud::e2e
