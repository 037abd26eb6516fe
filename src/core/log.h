// Named loggers, so that every log line says which component or subsystem wrote it.
#pragma once

#include <spdlog/spdlog.h>

#include <memory>
#include <string_view>

namespace gpud {

// The logger named `component` ("server", "kmsg", "accelerator-nvidia-xid", ...). It shares the
// default logger's sinks, level and pattern (set up by the CLI) and is created on first use; a
// later reconfiguration (setup_logging) drops it so it is re-created with the new sinks.
std::shared_ptr<spdlog::logger> logger(std::string_view component);

}  // namespace gpud
