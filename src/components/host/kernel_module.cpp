#include "components/host/kernel_module.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <nlohmann/json.hpp>
#include <set>

#include "host/modules.h"

namespace gpud::components {

std::vector<std::string> missing_kernel_modules(const std::vector<std::string>& required,
                                                const std::vector<std::string>& loaded) {
  std::set<std::string> have;
  for (const auto& m : loaded) have.insert(host::normalize_module_name(m));
  std::vector<std::string> missing;
  for (const auto& m : required)
    if (!have.contains(host::normalize_module_name(m))) missing.push_back(m);
  return missing;
}

KernelModuleComponent::KernelModuleComponent(const ComponentContext& ctx)
    : Component(ctx), fs_(ctx.config->host_root) {}

CheckResult KernelModuleComponent::check() {
  const auto& required = config().kernel_modules;
  nlohmann::json data = {{"required", required},
                         {"loaded", nlohmann::json::array()},
                         {"missing", nlohmann::json::array()}};
  if (required.empty()) {
    auto r =
        single_state(name(), Health::kHealthy, "no kernel modules to check", std::nullopt, data);
    r.detail = "no kernel modules configured (--kernel-modules)\n";
    return r;
  }
  auto loaded = host::read_loaded_modules(fs_);
  if (!loaded) {
    auto r = single_state(name(), Health::kUnhealthy, "failed to read loaded kernel modules",
                          std::nullopt, data);
    r.states.front().error = loaded.error().message;
    r.detail = "cannot read " + fs_.path("/proc/modules") + "\n";
    return r;
  }
  auto missing = missing_kernel_modules(required, *loaded);
  data["loaded"] = *loaded;
  data["missing"] = missing;
  CheckResult r;
  if (missing.empty()) {
    r = single_state(name(), Health::kHealthy, "all kernel modules are loaded", std::nullopt, data);
  } else {
    r = single_state(name(), Health::kUnhealthy,
                     fmt::format("kernel modules not loaded: {}", fmt::join(missing, ", ")),
                     std::nullopt, data);
  }
  r.detail = fmt::format(
      "required: {}\nmissing: {}\n", fmt::join(required, ", "),
      missing.empty() ? std::string("none") : fmt::format("{}", fmt::join(missing, ", ")));
  return r;
}

}  // namespace gpud::components
