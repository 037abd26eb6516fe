#include "components/host/memory.h"

#include <fmt/format.h>

#include "components/kernel_log_support.h"
#include "core/log.h"
#include "host/bytes.h"

namespace gpud::components {

using host::human_bytes;

nlohmann::json to_json(const MemorySnapshot& s) {
  nlohmann::json j;
  j["total_bytes"] = s.total_bytes;
  j["available_bytes"] = s.available_bytes;
  j["used_bytes"] = s.used_bytes();
  j["free_bytes"] = s.free_bytes;
  j["used_percent"] = s.used_percent();
  j["buffers_bytes"] = s.buffers_bytes;
  j["cached_bytes"] = s.cached_bytes;
  j["shmem_bytes"] = s.shmem_bytes;
  j["swap_total_bytes"] = s.swap_total_bytes;
  j["swap_free_bytes"] = s.swap_free_bytes;
  j["available_estimated"] = s.available_estimated;
  return j;
}

CheckResult evaluate_memory(const Result<MemorySnapshot>& snapshot) {
  if (!snapshot) {
    CheckResult r = single_state("memory", Health::kUnhealthy, "failed to collect memory stats");
    r.states[0].error = snapshot.error().message;
    r.detail = "error: " + snapshot.error().message + "\n";
    return r;
  }
  const MemorySnapshot& s = *snapshot;
  std::string reason =
      fmt::format("memory used {} of {} ({:.1f}%), {} available{}", human_bytes(s.used_bytes()),
                  human_bytes(s.total_bytes), s.used_percent(), human_bytes(s.available_bytes),
                  s.available_estimated ? " (estimated: no MemAvailable)" : "");
  CheckResult r = single_state("memory", Health::kHealthy, std::move(reason), std::nullopt,
                               {{"data", to_json(s).dump()}});
  r.detail = fmt::format("total: {}\nused: {} ({:.1f}%)\navailable: {}{}\nfree: {}\n",
                         human_bytes(s.total_bytes), human_bytes(s.used_bytes()), s.used_percent(),
                         human_bytes(s.available_bytes),
                         s.available_estimated ? " (estimated as free + buffers + cached)" : "",
                         human_bytes(s.free_bytes));
  return r;
}

MemoryComponent::MemoryComponent(const ComponentContext& ctx)
    : Component(ctx), fs_(ctx.config->host_root) {
  if (ctx.metrics != nullptr) {
    MetricRegistry& m = *ctx.metrics;
    m.describe("memory_total_bytes", "Total usable host memory in bytes");
    m.describe("memory_available_bytes", "Host memory available for new allocations in bytes");
    m.describe("memory_used_bytes", "Host memory in use (total - available) in bytes");
    m.describe("memory_free_bytes", "Unused host memory (MemFree) in bytes");
    m.describe("memory_used_percent", "Host memory in use in percent of total");
  }
}

CheckResult MemoryComponent::check() {
  Result<MemorySnapshot> snapshot = [&]() -> Result<MemorySnapshot> {
    auto text = fs_.read("/proc/meminfo");
    if (!text) return text.error();
    return host::parse_meminfo(*text);
  }();
  if (snapshot) {
    if (snapshot->available_estimated && !warned_estimate_.exchange(true))
      logger("memory")->warn(
          "/proc/meminfo has no MemAvailable (kernel < 3.14); estimating it as "
          "free + buffers + cached");
    if (ctx().metrics != nullptr) {
      MetricRegistry& m = *ctx().metrics;
      m.set("memory", "memory_total_bytes", static_cast<double>(snapshot->total_bytes));
      m.set("memory", "memory_available_bytes", static_cast<double>(snapshot->available_bytes));
      m.set("memory", "memory_used_bytes", static_cast<double>(snapshot->used_bytes()));
      m.set("memory", "memory_free_bytes", static_cast<double>(snapshot->free_bytes));
      m.set("memory", "memory_used_percent", snapshot->used_percent());
    }
  }
  CheckResult r = evaluate_memory(snapshot);
  // OOM kills from the kernel log are listed; they do not change health (GPUd's behaviour).
  append_event_summary(
      r, component_events(ctx(), name(),
                          lookback_start(ctx(), std::chrono::seconds(0), Clock::now())));
  return r;
}

}  // namespace gpud::components
