// The daemon under a flood of idle connections from other loopback addresses, as a neighbour on the
// node (a hostNetwork pod, another user) can open them: the liveness probe's /healthz must be
// answered, and the descriptors and memory the daemon uses stay bounded.
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <thread>

#include "testing/connection_load.h"
#include "tests/e2e/daemon_process.h"

namespace gpud::e2e {
namespace {

using namespace std::chrono_literals;

size_t open_fds(pid_t pid) {
  size_t n = 0;
  std::error_code ec;
  for (std::filesystem::directory_iterator it("/proc/" + std::to_string(pid) + "/fd", ec), end;
       !ec && it != end; it.increment(ec))
    ++n;
  return n;
}

// A field of /proc/<pid>/status in kB (VmHWM: the peak resident set); 0 when it cannot be read.
size_t status_kb(pid_t pid, const std::string& field) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);)
    if (line.rfind(field + ":", 0) == 0) return std::stoul(line.substr(field.size() + 1));
  return 0;
}

// The API's table holds 1024 connections. 1,100 connections from 127.0.0.2 to 127.0.0.6 that never
// send a byte, each reopened as soon as the daemon closes it, once left /healthz answering 1 probe
// in 15: the table was full and newcomers were refused. Now the longest-waiting connection gives
// way and 127.0.0.1 has a reserve: every probe (a new TLS connection each, like the kubelet's) is
// answered within a second, and the daemon's descriptors stay within its table.
TEST(ConnectionFloodE2E,
     HealthzProbesAreAnsweredWhileIdleConnectionsFromFiveAddressesFillTheTable) {
  constexpr size_t kTable = 1024;
  rlimit nofile{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &nofile), 0);
  if (nofile.rlim_max != RLIM_INFINITY && nofile.rlim_max < 2 * kTable + 400)
    GTEST_SKIP() << "the file descriptor limit (" << nofile.rlim_max
                 << ") cannot hold the flood and a full table in the daemon";
  nofile.rlim_cur = nofile.rlim_max;
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &nofile), 0);  // the daemon inherits it: its table is 1024

  const std::string dir = make_temp_dir();
  TempDirGuard guard{dir};
  DaemonProcess d(dir + "/data", {"--components", "cpu"});
  ASSERT_TRUE(d.ready()) << d.log();
  const size_t fds_before = open_fds(d.pid());
  size_t peak_fds = fds_before;
  // A kubelet probe's default timeout. The sanitizers make each TLS handshake of the daemon several
  // times slower while the flood's reconnections compete with it: there a probe gets 5 s, and 30
  // probes (about a second each) keep the test within its time.
#if defined(GPUD_SANITIZED)
  constexpr int kProbes = 30;
  constexpr auto kProbeTimeout = 5s;
#else
  constexpr int kProbes = 100;
  constexpr auto kProbeTimeout = 1s;
#endif
  int answered = 0;
  {
    testing::IdleFlood flood(
        d.port(), {"127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5", "127.0.0.6"}, 220);
    ASSERT_TRUE(eventually([&] { return flood.connects() >= 1100; }, 20s)) << flood.connects();
    std::this_thread::sleep_for(500ms);
    const auto start = std::chrono::steady_clock::now();
    auto slowest = std::chrono::steady_clock::duration::zero();
    for (int i = 0; i < kProbes; ++i) {
      const auto probe_start = std::chrono::steady_clock::now();
      testing::TestConnection probe(d.port(), true);
      if (probe.send(testing::kHealthzRequest) &&
          probe.read_response(kProbeTimeout).substr(0, 15) == "HTTP/1.1 200 OK")
        ++answered;
      slowest = std::max(slowest, std::chrono::steady_clock::now() - probe_start);
      peak_fds = std::max(peak_fds, open_fds(d.pid()));
      std::this_thread::sleep_for(50ms);
    }
    const auto seconds = std::chrono::duration_cast<std::chrono::milliseconds>(
                             std::chrono::steady_clock::now() - start)
                             .count() /
                         1000.0;
    std::cout << "idle flood: " << answered << "/" << kProbes << " probes answered in " << seconds
              << " s (slowest "
              << std::chrono::duration_cast<std::chrono::milliseconds>(slowest).count()
              << " ms); flood connections open " << flood.open() << ", made " << flood.connects()
              << "; daemon descriptors " << fds_before << " before, " << peak_fds
              << " at most; daemon VmHWM " << status_kb(d.pid(), "VmHWM") << " kB" << std::endl;
  }
  EXPECT_GE(answered, kProbes * 99 / 100);
  EXPECT_LE(peak_fds, fds_before + kTable + 8);
  EXPECT_EQ(d.stop(SIGTERM, 5000), 0) << d.log();
}

}  // namespace
}  // namespace gpud::e2e
