// Test helper: what a named logger writes while a LogCapture lives (message text only, one line
// per message).
#pragma once

#include <spdlog/sinks/ostream_sink.h>

#include <algorithm>
#include <memory>
#include <sstream>
#include <string>

#include "core/log.h"

namespace gpud::testing {

class LogCapture {
 public:
  explicit LogCapture(std::string logger_name)
      : name_(std::move(logger_name)),
        sink_(std::make_shared<spdlog::sinks::ostream_sink_mt>(out_)) {
    sink_->set_pattern("%v");
    logger(name_)->sinks().push_back(sink_);
  }
  ~LogCapture() {
    auto& sinks = logger(name_)->sinks();
    sinks.erase(std::remove(sinks.begin(), sinks.end(), sink_), sinks.end());
  }
  LogCapture(const LogCapture&) = delete;
  LogCapture& operator=(const LogCapture&) = delete;

  std::string text() {
    sink_->flush();
    return out_.str();
  }
  // How many times `needle` occurs in what was logged.
  size_t count(const std::string& needle) {
    std::string t = text();
    size_t n = 0;
    for (size_t at = t.find(needle); at != std::string::npos; at = t.find(needle, at + 1)) ++n;
    return n;
  }

 private:
  std::string name_;
  std::ostringstream out_;
  std::shared_ptr<spdlog::sinks::ostream_sink_mt> sink_;
};

}  // namespace gpud::testing
