#include "components/nvidia/peermem.h"

#include <fmt/format.h>

#include <algorithm>

#include "host/infiniband.h"

namespace gpud::components {
namespace {

constexpr const char* kComponent = "accelerator-nvidia-peermem";

}  // namespace

kmsg::ComponentRules peermem_kernel_log_rules() {
  kmsg::ComponentRules r;
  r.component = kComponent;
  r.lines = {kmsg::pattern_rule({{"invalid context", "contex"}}, "nvidia_peermem_invalid_context",
                                std::string(kmsg::kMessageStart) +
                                    R"(nvidia-peermem \S+ ERROR detected invalid context, )"
                                    R"(skipping further processing)",
                                "peermem error detected (possible GPU communication issue)")};
  return r;
}

PeermemStatus peermem_status(const std::vector<host::LoadedModule>& modules) {
  PeermemStatus s;
  for (const host::LoadedModule& m : modules) {
    const std::string name = host::normalize_module_name(m.name);
    if (name == "nvidia_peermem") s.peermem_loaded = true;
    if (name != "ib_core" || m.use_count == 0) continue;
    for (const std::string& user : m.used_by)
      if (host::normalize_module_name(user) == "nvidia_peermem") s.ib_core_uses_peermem = true;
  }
  return s;
}

CheckResult evaluate_peermem(const Result<std::vector<host::LoadedModule>>& modules,
                             bool ports_expected, int infiniband_ports, TimePoint now) {
  if (!modules)
    return single_state(kComponent, Health::kDegraded,
                        "cannot read the loaded kernel modules: " + modules.error().message,
                        std::nullopt, nullptr, now);
  const PeermemStatus s = peermem_status(*modules);
  // GPUd's extra_info keys.
  auto with_extra = [&](CheckResult r) {
    r.states[0].extra_info = {
        {"peermem_loaded", s.peermem_loaded ? "true" : "false"},
        {"ibcore_using_peermem_module", s.ib_core_uses_peermem ? "true" : "false"}};
    return r;
  };
  if (s.ib_core_uses_peermem)
    return with_extra(single_state(kComponent, Health::kHealthy,
                                   "ibcore successfully loaded peermem module", std::nullopt,
                                   nullptr, now));
  std::string reason = "ibcore is not using peermem module";
  if (s.peermem_loaded) reason += " (nvidia_peermem is loaded but ib_core does not list it)";
  if (!ports_expected || infiniband_ports == 0)
    return with_extra(
        single_state(kComponent, Health::kHealthy, reason, std::nullopt, nullptr, now));
  reason += fmt::format(
      " while {} InfiniBand port(s) are present and expected (--infiniband-expected-port-states): "
      "GPUDirect RDMA is off, load nvidia_peermem",
      infiniband_ports);
  return with_extra(
      single_state(kComponent, Health::kDegraded, reason, std::nullopt, nullptr, now));
}

PeermemComponent::PeermemComponent(const ComponentContext& ctx)
    : Component(ctx), fs_(ctx.config->host_root) {}

bool PeermemComponent::supported() const {
  return nvidia_kernel_log_supported(ctx(), name(), has_events_);
}

CheckResult PeermemComponent::check() {
  const TimePoint now = Clock::now();
  const Config& c = config();
  const bool expected = c.infiniband_expected_ports > 0 && c.infiniband_expected_rate_gbps > 0;
  int ports = 0;
  if (expected) {
    const std::string class_dir = c.infiniband_class_root_dir.empty()
                                      ? fs_.path("/sys/class/infiniband")
                                      : c.infiniband_class_root_dir;
    // An unreadable class directory is the infiniband component's to report.
    if (auto ib = host::read_infiniband(class_dir, c.infiniband_excluded_devices))
      ports = static_cast<int>(std::count_if(ib->ports.begin(), ib->ports.end(),
                                             [](const auto& p) { return p.infiniband(); }));
  }
  auto modules = host::read_loaded_modules_table(fs_);
  // No /proc/modules at all: a kernel without loadable modules, where peermem cannot be loaded.
  if (!modules && !fs_.exists("/proc/modules")) modules = std::vector<host::LoadedModule>{};
  CheckResult r = evaluate_peermem(modules, expected, ports, now);
  append_kernel_log_events(r, ctx(), name());
  return r;
}

}  // namespace gpud::components
