#include "app/runtime.h"

#include "components/registry.h"
#include "core/log.h"
#include "host/host_fs.h"
#include "host/nvidia_driver_root.h"
#include "host/pci.h"

namespace gpud::app {

Result<std::unique_ptr<Runtime>> build_runtime(const Config& config, RuntimeMode mode,
                                               DaemonHooks hooks) {
  const bool scan = mode == RuntimeMode::kScan;
  auto rt = std::make_unique<Runtime>();
  auto db = scan || config.db_in_memory
                ? store::Database::open_in_memory()
                : store::Database::open(config.data_dir + "/" + store::kStateFileName);
  if (!db) return db.error();
  rt->db = std::move(*db);
  if (!scan) rt->db->set_metrics(&rt->metrics);
  rt->events = std::make_unique<store::EventStore>(*rt->db);

  rt->nvidia = std::make_unique<nvml::NvidiaSource>(
      config.nvml_lib, config.nvml_call_timeout, std::chrono::seconds(5),
      host::nvidia_driver_roots(host::HostFs(config.host_root), config.nvidia_driver_root));
  // The daemon serves its API while nvmlInit runs (a hung driver holds it for the whole
  // deadline); a scan has nothing to serve and waits.
  if (scan)
    rt->nvidia->open();
  else
    rt->nvidia->open_async();

  components::ComponentContext ctx{&config, rt->events.get(), &rt->metrics, scan};
  const host::HostFs host_fs(config.host_root);
  rt->nvidia_pci_present = host::nvidia_gpu_present(host_fs);
  if (auto bus = host_fs.list("/sys/bus/pci/devices"); !bus && config.gpu_count == 0)
    logger("nvml")->warn(
        "cannot list the PCI devices ({}): whether NVIDIA GPUs are present is unknown, so a "
        "missing NVIDIA driver reads as not applicable; mount the host's /sys (under "
        "--host-root) or pass --gpu-count",
        bus.error().message);
  ctx.nvidia_pci_present = rt->nvidia_pci_present;
  ctx.nvidia = rt->nvidia.get();
  rt->container_source = std::make_unique<runtimes::ContainerSource>(
      rt->containers, runtimes::CriHelper{config.cri_helper});
  ctx.containers = &rt->containers;
  ctx.container_source = rt->container_source.get();
  ctx.kernel_log_scan = scan && !config.kernel_logs.empty();
  if (!scan) {
    rt->gpud_probes.db = rt->db.get();
    rt->gpud_probes.events = rt->events.get();
    rt->gpud_probes.kernel_log = std::move(hooks.kernel_log_counters);
    rt->gpud_probes.sinks = std::move(hooks.sinks);
    ctx.gpud = &rt->gpud_probes;
  }
  if (auto r = components::register_all(rt->registry, ctx); !r) return r.error();

  // The rules of the registered components only: the pipeline keeps no other component's events.
  rt->pipeline =
      std::make_unique<kmsg::EventPipeline>(components::kernel_log_rules(rt->registry), *rt->events,
                                            rt->metrics, std::move(hooks.on_kernel_log_event));
  return rt;
}

}  // namespace gpud::app
