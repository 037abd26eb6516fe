#include "components/host/file.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <nlohmann/json.hpp>

namespace gpud::components {

std::vector<std::string> missing_files(const host::HostFs& fs,
                                       const std::vector<std::string>& required) {
  std::vector<std::string> missing;
  for (const std::string& f : required)
    if (!fs.exists(f)) missing.push_back(f);
  return missing;
}

FileComponent::FileComponent(const ComponentContext& ctx)
    : Component(ctx), fs_(ctx.config->host_root) {}

CheckResult FileComponent::check() {
  const auto& required = config().files;
  auto missing = missing_files(fs_, required);
  nlohmann::json data = {{"files", required}, {"missing", missing}};
  CheckResult r;
  if (required.empty()) {
    r = single_state(name(), Health::kHealthy, "no files to check", std::nullopt, data);
    r.detail = "no files configured (--files)\n";
    return r;
  }
  if (missing.empty()) {
    r = single_state(name(), Health::kHealthy, "all files exist", std::nullopt, data);
  } else {
    r = single_state(name(), Health::kUnhealthy,
                     fmt::format("files missing: {}", fmt::join(missing, ", ")), std::nullopt,
                     data);
  }
  for (const auto& f : required) {
    bool gone = std::find(missing.begin(), missing.end(), f) != missing.end();
    r.detail += fmt::format("{}: {}\n", f, gone ? "missing" : "exists");
  }
  return r;
}

}  // namespace gpud::components
