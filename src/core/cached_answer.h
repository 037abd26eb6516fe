// CachedAnswer: a yes/no answer that costs lookups (is a program installed, does a socket exist),
// asked before every check and looked up again at most once per max_age: installing the program
// later needs no restart, and an idle daemon does not search PATH every few seconds.
#pragma once

#include <chrono>
#include <mutex>
#include <optional>

namespace gpud {

class CachedAnswer {
 public:
  explicit CachedAnswer(std::chrono::steady_clock::duration max_age = std::chrono::minutes(1))
      : max_age_(max_age) {}

  // The last answer of look_up, or a fresh one when there is none or it is older than max_age.
  // Thread-safe; look_up runs under the lock, so it runs once at a time.
  template <typename LookUp>
  bool get(LookUp&& look_up) const {
    std::lock_guard lock(mu_);
    const auto now = std::chrono::steady_clock::now();
    if (!at_ || now - *at_ >= max_age_) {
      value_ = look_up();
      at_ = now;
    }
    return value_;
  }

 private:
  std::chrono::steady_clock::duration max_age_;
  mutable std::mutex mu_;
  mutable std::optional<std::chrono::steady_clock::time_point> at_;
  mutable bool value_ = false;
};

}  // namespace gpud
