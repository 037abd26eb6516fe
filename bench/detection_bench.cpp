// Detection latency: an Xid line appended to the kernel log gpud follows (a private file,
// GPUD_KMSG_PATH) to the Xid component's Unhealthy state in /v1/states, and to its health series
// in /metrics, on eight fake GPUs (h100x8-healthy.json). One daemon; per iteration set-healthy,
// a new line, then both APIs polled every millisecond over a kept-alive connection. The Time
// column is the mean to /v1/states; the counters the worst of all iterations. GPUD_BINARY,
// GPUD_FAKE_NVML and GPUD_SOURCE_DIR as for startup_bench.cpp.
#include <benchmark/benchmark.h>
#include <httplib.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;
constexpr const char* kXid = "accelerator-nvidia-error-xid";

bool xid_state_is(httplib::Client& cli, const std::string& health) {
  auto r = cli.Get(std::string("/v1/states?components=") + kXid);
  return r && r->status == 200 &&
         r->body.find("\"health\":\"" + health + "\"") != std::string::npos;
}

bool xid_metric_is_unhealthy(httplib::Client& cli) {
  auto r = cli.Get("/metrics");
  return r && r->status == 200 &&
         r->body.find(std::string("gpud_component_health{component=\"") + kXid +
                      "\",health=\"Unhealthy\"} 1") != std::string::npos;
}

template <typename Pred>
bool poll_until(Pred pred, std::chrono::milliseconds limit) {
  const auto end = Clock::now() + limit;
  while (Clock::now() < end) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return pred();
}

void BM_XidLineToUnhealthy(benchmark::State& state) {
  const char* bin = std::getenv("GPUD_BINARY");
  const char* lib = std::getenv("GPUD_FAKE_NVML");
  const char* src = std::getenv("GPUD_SOURCE_DIR");
  if (bin == nullptr || lib == nullptr || src == nullptr) {
    state.SkipWithError("GPUD_BINARY, GPUD_FAKE_NVML or GPUD_SOURCE_DIR not set");
    return;
  }
  const std::string scenario = std::string(src) + "/testing/fixtures/nvml/h100x8-healthy.json";
  if (!std::filesystem::exists(lib) || !std::filesystem::exists(scenario)) {
    state.SkipWithError("the fake NVML library or the healthy scenario is missing");
    return;
  }
  const std::string dir = "/tmp/gpud-bench-detection-" + std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string kmsg = dir + "/kmsg";
  { std::ofstream(kmsg).flush(); }
  const std::string addr = "127.0.0.1:18800";
  std::vector<std::string> args{bin,
                                "run",
                                "--listen-address",
                                addr,
                                "--data-dir",
                                dir + "/data",
                                "--log-level",
                                "error",
                                "--nvml-lib",
                                std::filesystem::absolute(lib).string()};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::string kmsg_env = "GPUD_KMSG_PATH=" + kmsg;
  std::string scenario_env = "FAKE_NVML_SCENARIO=" + scenario;
  pid_t pid = ::fork();
  if (pid == 0) {
    ::putenv(kmsg_env.data());
    ::putenv(scenario_env.data());
    ::execv(bin, argv.data());
    _exit(127);
  }
  httplib::Client cli("https://" + addr);
  cli.enable_server_certificate_verification(false);
  cli.set_keep_alive(true);
  cli.set_connection_timeout(0, 200000);
  auto stop = [&] {
    ::kill(pid, SIGTERM);
    ::waitpid(pid, nullptr, 0);
    std::filesystem::remove_all(dir);
  };
  if (!poll_until([&] { return xid_state_is(cli, "Healthy"); }, std::chrono::seconds(30))) {
    stop();
    state.SkipWithError("the Xid component did not turn Healthy in 30 s");
    return;
  }
  double worst_states_ms = 0, worst_metrics_ms = 0;
  int n = 0;
  for (auto _ : state) {
    const std::string bus = "0000:" + std::to_string(10 + n % 80) + ":00";
    ++n;
    auto t0 = Clock::now();
    std::ofstream(kmsg, std::ios::app)
        << "<3>NVRM: Xid (PCI:" << bus << "): 79, pid=1, name=x, GPU has fallen off the bus.\n";
    const bool states_ok =
        poll_until([&] { return xid_state_is(cli, "Unhealthy"); }, std::chrono::seconds(10));
    auto t1 = Clock::now();
    const bool metrics_ok =
        poll_until([&] { return xid_metric_is_unhealthy(cli); }, std::chrono::seconds(10));
    auto t2 = Clock::now();
    state.SetIterationTime(std::chrono::duration<double>(t1 - t0).count());
    worst_states_ms =
        std::max(worst_states_ms, std::chrono::duration<double, std::milli>(t1 - t0).count());
    worst_metrics_ms =
        std::max(worst_metrics_ms, std::chrono::duration<double, std::milli>(t2 - t0).count());
    if (!states_ok || !metrics_ok) {
      state.SkipWithError("the Xid line was not judged Unhealthy in 10 s");
      break;
    }
    state.PauseTiming();
    (void)cli.Post(std::string("/v1/health-states/set-healthy?components=") + kXid);
    const bool healthy =
        poll_until([&] { return xid_state_is(cli, "Healthy") && !xid_metric_is_unhealthy(cli); },
                   std::chrono::seconds(10));
    state.ResumeTiming();
    if (!healthy) {
      state.SkipWithError("set-healthy did not clear the Xid in 10 s");
      break;
    }
  }
  state.counters["worst_states_ms"] = worst_states_ms;
  state.counters["worst_metrics_ms"] = worst_metrics_ms;
  stop();
}
BENCHMARK(BM_XidLineToUnhealthy)
    ->UseManualTime()
    ->Iterations(10)
    ->Repetitions(1)
    ->Unit(benchmark::kMillisecond);

}  // namespace
