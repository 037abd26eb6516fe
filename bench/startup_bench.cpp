// Start-up latency: exec of `gpud run` (TLS, fresh data dir) to the first successful /healthz,
// polled in-process every millisecond so the figure is the daemon's, not a client's start-up; on
// a plain node, and on eight fake GPUs whose driver hangs (h100x8-hung-driver.json: a call blocks
// 15 s, past the 10 s deadline). GPUD_BINARY names the binary, GPUD_FAKE_NVML the fake
// libnvidia-ml.so.1 and GPUD_SOURCE_DIR the source tree (bench/run-bench.sh sets them).
#include <benchmark/benchmark.h>
#include <httplib.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

namespace {

// One start per iteration; the Time column is the mean, the "worst_ms" counter the slowest.
void run_starts(benchmark::State& state, int port, const std::vector<std::string>& extra,
                const std::string& env) {
  const char* bin = std::getenv("GPUD_BINARY");
  if (bin == nullptr) {
    state.SkipWithError("GPUD_BINARY not set");
    return;
  }
  double worst_ms = 0;
  for (auto _ : state) {
    ++port;
    std::string dir = "/tmp/gpud-bench-startup-" + std::to_string(port);
    std::filesystem::remove_all(dir);
    std::string addr = "127.0.0.1:" + std::to_string(port);
    std::vector<std::string> args{bin,          "run", "--listen-address", addr,
                                  "--data-dir", dir,   "--log-level",      "error"};
    args.insert(args.end(), extra.begin(), extra.end());
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    std::string env_entry = env;
    auto t0 = std::chrono::steady_clock::now();
    pid_t pid = ::fork();
    if (pid == 0) {
      if (!env_entry.empty()) ::putenv(env_entry.data());
      ::execv(bin, argv.data());
      _exit(127);
    }
    httplib::Client cli("https://" + addr);
    cli.enable_server_certificate_verification(false);
    cli.set_connection_timeout(0, 200000);
    bool ok = false;
    while (!ok && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(20)) {
      auto r = cli.Get("/healthz");
      ok = r && r->status == 200;
      if (!ok) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    auto t1 = std::chrono::steady_clock::now();
    const double s = std::chrono::duration<double>(t1 - t0).count();
    state.SetIterationTime(s);
    worst_ms = std::max(worst_ms, s * 1000);
    ::kill(pid, SIGTERM);
    ::waitpid(pid, nullptr, 0);
    std::filesystem::remove_all(dir);
    if (!ok) state.SkipWithError("gpud did not become ready in 20 s");
  }
  state.counters["worst_ms"] = worst_ms;
}

void BM_StartupToHealthz(benchmark::State& state) { run_starts(state, 18600, {}, ""); }
BENCHMARK(BM_StartupToHealthz)
    ->UseManualTime()
    ->Iterations(10)
    ->Repetitions(1)
    ->Unit(benchmark::kMillisecond);

void BM_StartupToHealthzOnHungDriver(benchmark::State& state) {
  const char* lib = std::getenv("GPUD_FAKE_NVML");
  const char* src = std::getenv("GPUD_SOURCE_DIR");
  if (lib == nullptr || src == nullptr) {
    state.SkipWithError("GPUD_FAKE_NVML or GPUD_SOURCE_DIR not set");
    return;
  }
  // Without the library or the scenario the fake would not hang, and the figure would be a plain
  // start's.
  const std::string scenario = std::string(src) + "/testing/fixtures/nvml/h100x8-hung-driver.json";
  if (!std::filesystem::exists(lib) || !std::filesystem::exists(scenario)) {
    state.SkipWithError("the fake NVML library or the hung-driver scenario is missing");
    return;
  }
  run_starts(state, 18700, {"--nvml-lib", std::filesystem::absolute(lib).string()},
             "FAKE_NVML_SCENARIO=" + scenario);
}
BENCHMARK(BM_StartupToHealthzOnHungDriver)
    ->UseManualTime()
    ->Iterations(5)
    ->Repetitions(1)
    ->Unit(benchmark::kMillisecond);

}  // namespace
