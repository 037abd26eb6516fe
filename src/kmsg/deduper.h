// Drops repeats of the same kernel-log event: an identical key (component/name/message) seen
// again within the window is one event. Memory is bounded.
#pragma once

#include <chrono>
#include <deque>
#include <string>
#include <string_view>
#include <unordered_map>

#include "core/health.h"

namespace gpud::kmsg {

class Deduper {
 public:
  explicit Deduper(std::chrono::seconds window = std::chrono::seconds(60),
                   size_t max_entries = 8192);

  // True when `key` was accepted less than `window` before (or after) `t`: drop it. Otherwise
  // records `t` for the key and returns false.
  bool is_duplicate(std::string_view key, TimePoint t);
  bool is_duplicate(std::string_view component, std::string_view name, std::string_view message,
                    TimePoint t);

  size_t size() const { return last_.size(); }
  std::chrono::seconds window() const { return window_; }

 private:
  void evict(TimePoint newest);

  std::chrono::seconds window_;
  size_t max_entries_;
  std::unordered_map<std::string, TimePoint> last_;
  std::deque<std::pair<TimePoint, std::string>> order_;  // insertion order, for eviction
  TimePoint newest_{};
};

}  // namespace gpud::kmsg
