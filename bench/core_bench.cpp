// Micro-benchmarks of work on the API's request path: Prometheus rendering and state JSON encoding.
#include <benchmark/benchmark.h>

#include "core/json.h"
#include "core/metrics.h"

namespace {

void BM_PrometheusText(benchmark::State& state) {
  gpud::MetricRegistry reg;
  for (int gpu = 0; gpu < 8; ++gpu)
    for (int m = 0; m < 40; ++m)
      reg.set("accelerator-nvidia-temperature", "metric_" + std::to_string(m), gpu * m,
              {{"uuid", "GPU-" + std::to_string(gpu)}});
  for (auto _ : state) benchmark::DoNotOptimize(reg.prometheus_text());
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(reg.series_count()));
}
BENCHMARK(BM_PrometheusText);

void BM_StateJson(benchmark::State& state) {
  auto r = gpud::single_state("cpu", gpud::Health::kHealthy, "cpu usage 3.2%",
                              gpud::SuggestedActions{"", {gpud::RepairAction::kRebootSystem}},
                              nlohmann::json{{"data", std::string(512, 'x')}});
  for (auto _ : state) benchmark::DoNotOptimize(gpud::to_json(r.states).dump());
}
BENCHMARK(BM_StateJson);

}  // namespace

BENCHMARK_MAIN();
