// Named loggers, so that every log line says which component or subsystem wrote it.
#pragma once

#include <spdlog/spdlog.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string_view>

namespace gpud {

// The logger named `component` ("server", "kmsg", "accelerator-nvidia-xid", ...). It shares the
// default logger's sinks, level and pattern (set up by the CLI) and is created on first use; a
// later reconfiguration (setup_logging) drops it so it is re-created with the new sinks.
std::shared_ptr<spdlog::logger> logger(std::string_view component);

// Which of a stream of alike warnings (one per refused request, say) reach the log: the first,
// then at most one per interval, so a client that repeats a refused request cannot flood the log;
// each line that is logged carries how many were left out before it.
class LogRateLimiter {
 public:
  using SteadyClock = std::chrono::steady_clock;
  explicit LogRateLimiter(SteadyClock::duration interval) : interval_(interval) {}
  // nullopt: leave this one out (it is counted); else log it, with the number left out since the
  // last one logged.
  std::optional<uint64_t> admit(SteadyClock::time_point now = SteadyClock::now());

 private:
  const SteadyClock::duration interval_;
  std::mutex mu_;
  std::optional<SteadyClock::time_point> last_;
  uint64_t suppressed_ = 0;
};

}  // namespace gpud
