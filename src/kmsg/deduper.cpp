#include "kmsg/deduper.h"

namespace gpud::kmsg {

Deduper::Deduper(std::chrono::seconds window, size_t max_entries)
    : window_(window), max_entries_(std::max<size_t>(max_entries, 1)) {}

bool Deduper::is_duplicate(std::string_view component, std::string_view name,
                           std::string_view message, TimePoint t) {
  std::string key;
  key.reserve(component.size() + name.size() + message.size() + 2);
  key.append(component).append("\x1f").append(name).append("\x1f").append(message);
  return is_duplicate(key, t);
}

bool Deduper::is_duplicate(std::string_view key, TimePoint t) {
  std::string k(key);
  auto it = last_.find(k);
  if (it != last_.end()) {
    const auto d = t > it->second ? t - it->second : it->second - t;
    if (d < window_) return true;
    it->second = t;
  } else {
    last_.emplace(k, t);
  }
  order_.emplace_back(t, std::move(k));
  if (t > newest_) newest_ = t;
  evict(newest_);
  return false;
}

void Deduper::evict(TimePoint newest) {
  // Entries older than the window can no longer suppress anything (for in-order input); the
  // size cap bounds memory even when times go backwards.
  while (!order_.empty() &&
         (order_.size() > max_entries_ || order_.front().first + window_ < newest)) {
    auto& [t, k] = order_.front();
    auto it = last_.find(k);
    if (it != last_.end() && it->second == t) last_.erase(it);
    order_.pop_front();
  }
}

}  // namespace gpud::kmsg
