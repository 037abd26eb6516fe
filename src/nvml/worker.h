// The NVML worker: one dedicated thread that runs every NVML call, with a deadline per call, so a
// hung driver makes callers fail with a timeout instead of blocking the daemon.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>

#include "core/result.h"

namespace gpud::nvml {

inline constexpr std::chrono::milliseconds kDefaultCallDeadline{10000};
inline constexpr const char* kTimeoutMessage = "NVML call timed out, driver may be hung";
// Error::code of a timeout (HTTP 504 reads naturally if it ever reaches a handler).
inline constexpr int kTimeoutErrorCode = 504;

bool is_timeout(const Error& e);

class Worker {
 public:
  explicit Worker(std::string name = "nvml-worker");
  ~Worker();  // stop(); a worker stuck in a call is detached, never joined
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  // Runs `job` on the worker thread and waits at most `deadline` (queueing included), or until
  // stop(). The job may outlive this call when it times out, so it must own (capture by value)
  // everything it touches.
  [[nodiscard]] Result<void> run(std::function<void()> job,
                                 std::chrono::milliseconds deadline = kDefaultCallDeadline);

  // Runs `fn` on the worker and returns its result (fn returns T or Result<T>).
  template <typename F>
  [[nodiscard]] auto call(F fn, std::chrono::milliseconds deadline = kDefaultCallDeadline) {
    using R = std::invoke_result_t<F&>;
    if constexpr (IsResult<R>::value) {
      using T = typename IsResult<R>::type;
      auto out = std::make_shared<std::optional<Result<T>>>();
      auto st = run([fn = std::move(fn), out]() mutable { out->emplace(fn()); }, deadline);
      if (!st.ok()) return Result<T>(st.error());
      return std::move(**out);
    } else {
      auto out = std::make_shared<std::optional<R>>();
      auto st = run([fn = std::move(fn), out]() mutable { out->emplace(fn()); }, deadline);
      if (!st.ok()) return Result<R>(st.error());
      return Result<R>(std::move(**out));
    }
  }

  // True while a call has run past its deadline and has not returned yet.
  bool stuck() const;
  // Stops the thread: waits up to `grace` for the current call; returns false (and detaches the
  // thread) when it is stuck. Idempotent.
  bool stop(std::chrono::milliseconds grace = std::chrono::milliseconds(500));

 private:
  template <typename X>
  struct IsResult : std::false_type {};
  template <typename X>
  struct IsResult<Result<X>> : std::true_type {
    using type = X;
  };

  struct State;
  std::shared_ptr<State> state_;
};

}  // namespace gpud::nvml
