#include "components/registry.h"

#include <algorithm>
#include <functional>
#include <memory>

#include "components/host/cpu.h"
#include "components/host/disk.h"
#include "components/host/fd.h"
#include "components/host/file.h"
#include "components/host/kernel_module.h"
#include "components/host/library.h"
#include "components/host/memory.h"
#include "components/host/nfs.h"
#include "components/host/os.h"
#include "components/host/pci.h"
#include "components/nvidia/bad_envs.h"
#include "components/nvidia/clock_speed.h"
#include "components/nvidia/ecc.h"
#include "components/nvidia/fabric_manager.h"
#include "components/nvidia/gpm.h"
#include "components/nvidia/gpu_counts.h"
#include "components/nvidia/gsp_firmware_mode.h"
#include "components/nvidia/hw_slowdown.h"
#include "components/nvidia/infiniband.h"
#include "components/nvidia/info.h"
#include "components/nvidia/memory.h"
#include "components/nvidia/nccl.h"
#include "components/nvidia/nvlink.h"
#include "components/nvidia/pcie.h"
#include "components/nvidia/peermem.h"
#include "components/nvidia/persistence_mode.h"
#include "components/nvidia/power.h"
#include "components/nvidia/processes.h"
#include "components/nvidia/remapped_rows.h"
#include "components/nvidia/retired_pages.h"
#include "components/nvidia/sxid.h"
#include "components/nvidia/temperature.h"
#include "components/nvidia/utilization.h"
#include "components/nvidia/xid.h"
#include "components/self/gpud.h"

namespace gpud::components {
namespace {

using Factory = std::function<std::unique_ptr<Component>(const ComponentContext&)>;

template <typename T>
std::pair<const char*, Factory> entry(const char* name) {
  return {name, [](const ComponentContext& ctx) { return std::make_unique<T>(ctx); }};
}

// Every component gpud has, by name. Adding a component means adding one line here.
const std::vector<std::pair<const char*, Factory>>& all_components() {
  static const std::vector<std::pair<const char*, Factory>> kAll = {
      entry<XidComponent>("accelerator-nvidia-error-xid"),
      entry<SxidComponent>("accelerator-nvidia-error-sxid"),
      entry<InfinibandComponent>("accelerator-nvidia-infiniband"),
      entry<NcclComponent>("accelerator-nvidia-nccl"),
      entry<PeermemComponent>("accelerator-nvidia-peermem"),
      entry<CpuComponent>("cpu"),
      entry<DiskComponent>("disk"),
      entry<FdComponent>("fd"),
      entry<FileComponent>("file"),
      entry<GpudComponent>("gpud"),
      entry<KernelModuleComponent>("kernel-module"),
      entry<LibraryComponent>("library"),
      entry<MemoryComponent>("memory"),
      entry<NfsComponent>("nfs"),
      entry<OsComponent>("os"),
      // NVIDIA GPUs
      entry<BadEnvsComponent>("accelerator-nvidia-bad-envs"),
      entry<FabricManagerComponent>("accelerator-nvidia-fabric-manager"),
      entry<GpmComponent>("accelerator-nvidia-gpm"),
      entry<GspFirmwareModeComponent>("accelerator-nvidia-gsp-firmware-mode"),
      entry<NvlinkComponent>("accelerator-nvidia-nvlink"),
      entry<PcieComponent>("accelerator-nvidia-pcie"),
      entry<PersistenceModeComponent>("accelerator-nvidia-persistence-mode"),
      entry<ProcessesComponent>("accelerator-nvidia-processes"),
      entry<ClockSpeedComponent>("accelerator-nvidia-clock-speed"),
      entry<EccComponent>("accelerator-nvidia-ecc"),
      entry<GpuCountsComponent>("accelerator-nvidia-gpu-counts"),
      entry<HwSlowdownComponent>("accelerator-nvidia-hw-slowdown"),
      entry<InfoComponent>("accelerator-nvidia-info"),
      entry<GpuMemoryComponent>("accelerator-nvidia-memory"),
      entry<PowerComponent>("accelerator-nvidia-power"),
      entry<RemappedRowsComponent>("accelerator-nvidia-remapped-rows"),
      entry<RetiredPagesComponent>("accelerator-nvidia-retired-pages"),
      entry<TemperatureComponent>("accelerator-nvidia-temperature"),
      entry<UtilizationComponent>("accelerator-nvidia-utilization"),
      entry<PciComponent>("pci"),
  };
  return kAll;
}

}  // namespace

Result<void> register_all(Registry& registry, const ComponentContext& ctx) {
  for (const auto& [name, make] : all_components()) {
    if (!component_enabled(name, ctx.config->components)) continue;
    if (auto r = registry.add(make(ctx)); !r) return r;
  }
  return {};
}

std::vector<std::string> known_names() {
  std::vector<std::string> out;
  for (const auto& [name, make] : all_components()) out.emplace_back(name);
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace gpud::components
