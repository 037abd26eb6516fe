// Start-up latency: exec of `gpud run` (TLS, fresh data dir) to the first successful /healthz,
// polled in-process every millisecond so the figure is the daemon's, not a client's start-up.
// GPUD_BINARY names the binary (bench/run-bench.sh sets it).
#include <benchmark/benchmark.h>
#include <httplib.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>

namespace {

void BM_StartupToHealthz(benchmark::State& state) {
  const char* bin = std::getenv("GPUD_BINARY");
  if (bin == nullptr) {
    state.SkipWithError("GPUD_BINARY not set");
    return;
  }
  int port = 18600;
  for (auto _ : state) {
    ++port;
    std::string dir = "/tmp/gpud-bench-startup-" + std::to_string(port);
    std::filesystem::remove_all(dir);
    std::string addr = "127.0.0.1:" + std::to_string(port);
    auto t0 = std::chrono::steady_clock::now();
    pid_t pid = ::fork();
    if (pid == 0) {
      ::execl(bin, bin, "run", "--listen-address", addr.c_str(), "--data-dir", dir.c_str(),
              "--log-level", "error", static_cast<char*>(nullptr));
      _exit(127);
    }
    httplib::Client cli("https://" + addr);
    cli.enable_server_certificate_verification(false);
    cli.set_connection_timeout(0, 200000);
    bool ok = false;
    while (!ok && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(10)) {
      auto r = cli.Get("/healthz");
      ok = r && r->status == 200;
      if (!ok) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    auto t1 = std::chrono::steady_clock::now();
    state.SetIterationTime(std::chrono::duration<double>(t1 - t0).count());
    ::kill(pid, SIGTERM);
    ::waitpid(pid, nullptr, 0);
    std::filesystem::remove_all(dir);
    if (!ok) state.SkipWithError("gpud did not become ready in 10 s");
  }
}
BENCHMARK(BM_StartupToHealthz)
    ->UseManualTime()
    ->Iterations(10)
    ->Repetitions(1)
    ->Unit(benchmark::kMillisecond);

}  // namespace
