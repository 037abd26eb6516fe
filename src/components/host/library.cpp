#include "components/host/library.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sys/stat.h>

#include <nlohmann/json.hpp>

#include "host/nvidia_driver_root.h"
#include "host/pci.h"

namespace gpud::components {

const std::vector<LibrarySpec>& default_library_specs() {
  static const std::vector<LibrarySpec> kSpecs = {
      {"libnvidia-ml.so.1", {"libnvidia-ml.so.1", "libnvidia-ml.so"}},
      {"libcuda.so.1", {"libcuda.so.1", "libcuda.so"}},
  };
  return kSpecs;
}

const std::vector<std::string>& default_library_dirs() {
  static const std::vector<std::string> kDirs = {
      "/usr/lib/x86_64-linux-gnu",
      "/usr/lib/x86_64-linux-gnu/nvidia/current",
      "/usr/lib64",
      "/lib64",
      "/lib/x86_64-linux-gnu",
      "/lib/x86_64-linux-gnu/nvidia/current",
      "/usr/lib/aarch64-linux-gnu",
      "/usr/lib/aarch64-linux-gnu/nvidia",
      "/usr/lib/aarch64-linux-gnu/nvidia/current",
      "/lib/aarch64-linux-gnu",
      "/lib/aarch64-linux-gnu/nvidia",
      "/lib/aarch64-linux-gnu/nvidia/current",
      "/usr/local/nvidia/lib64",
      "/cm/local/apps/cuda/libs/current/lib64",
      "/usr/lib",
      "/",
  };
  return kDirs;
}

namespace {

// The first of dirs under `fs` holding one of the spec's files; "" when none does.
std::string find_library(const host::HostFs& fs, const LibrarySpec& spec,
                         const std::vector<std::string>& dirs) {
  for (const std::string& dir : dirs) {
    for (const std::string& alt : spec.alternatives) {
      std::string p = dir == "/" ? "/" + alt : dir + "/" + alt;
      // lstat too: under a host root an absolute symlink points outside it but still proves the
      // library is installed on the host.
      struct stat st;
      if (fs.exists(p) || ::lstat(fs.path(p).c_str(), &st) == 0) return p;
    }
  }
  return "";
}

}  // namespace

std::vector<LibraryLookup> find_libraries(const host::HostFs& fs,
                                          const std::vector<LibrarySpec>& specs,
                                          const std::vector<std::string>& dirs,
                                          const std::vector<std::string>& driver_roots) {
  std::vector<LibraryLookup> out;
  for (const LibrarySpec& spec : specs) {
    LibraryLookup l{spec.name, find_library(fs, spec, dirs)};
    for (const std::string& root : driver_roots) {
      if (!l.path.empty()) break;
      host::HostFs driver(root);
      if (std::string p = find_library(driver, spec, dirs); !p.empty()) l.path = driver.path(p);
    }
    out.push_back(std::move(l));
  }
  return out;
}

LibraryEvaluation evaluate_libraries(const std::vector<LibraryLookup>& found) {
  std::vector<std::string> reasons;
  for (const LibraryLookup& l : found)
    if (l.path.empty()) reasons.push_back(fmt::format("library \"{}\" does not exist", l.name));
  LibraryEvaluation ev;
  if (reasons.empty()) {
    ev.reason = "all libraries exist";
    return ev;
  }
  ev.health = Health::kUnhealthy;
  ev.reason = fmt::format("{}", fmt::join(reasons, "; "));
  ev.actions = SuggestedActions{"install the NVIDIA driver's user-space libraries", {}};
  return ev;
}

LibraryComponent::LibraryComponent(const ComponentContext& ctx)
    : Component(ctx),
      fs_(ctx.config->host_root),
      driver_roots_(host::nvidia_driver_roots(fs_, ctx.config->nvidia_driver_root)),
      nvidia_gpu_present_(host::nvidia_gpu_present(fs_)) {}

CheckResult LibraryComponent::check() {
  auto found = find_libraries(fs_, default_library_specs(), default_library_dirs(), driver_roots_);
  LibraryEvaluation ev = evaluate_libraries(found);
  nlohmann::json libs = nlohmann::json::object();
  std::string detail;
  for (const LibraryLookup& l : found) {
    libs[l.name] = l.path;
    detail += fmt::format("{}: {}\n", l.name, l.path.empty() ? "not found" : l.path);
  }
  auto r =
      single_state(name(), ev.health, ev.reason, ev.actions, nlohmann::json{{"libraries", libs}});
  r.detail = std::move(detail);
  return r;
}

}  // namespace gpud::components
