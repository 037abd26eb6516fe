#include "core/log.h"

#include <mutex>
#include <string>
#include <utility>

namespace gpud {

std::shared_ptr<spdlog::logger> logger(std::string_view component) {
  std::string name(component);
  if (auto l = spdlog::get(name)) return l;
  // Two threads asking for the same new name must not both register it (spdlog throws on that).
  static std::mutex mu;
  std::lock_guard lock(mu);
  if (auto l = spdlog::get(name)) return l;
  auto l = spdlog::default_logger()->clone(name);
  try {
    spdlog::register_logger(l);
  } catch (const spdlog::spdlog_ex&) {
    // setup_logging registered the same name meanwhile; use that one.
    if (auto existing = spdlog::get(name)) return existing;
  }
  return l;
}

std::optional<uint64_t> LogRateLimiter::admit(SteadyClock::time_point now) {
  std::lock_guard lock(mu_);
  if (last_ && now - *last_ < interval_) {
    ++suppressed_;
    return std::nullopt;
  }
  last_ = now;
  return std::exchange(suppressed_, 0);
}

}  // namespace gpud
