#include "components/registry.h"

#include <algorithm>
#include <functional>
#include <memory>

#include "components/containers/containerd.h"
#include "components/containers/docker.h"
#include "components/containers/kubelet.h"
#include "components/host/cpu.h"
#include "components/host/disk.h"
#include "components/host/fd.h"
#include "components/host/file.h"
#include "components/host/fuse.h"
#include "components/host/kernel_module.h"
#include "components/host/library.h"
#include "components/host/memory.h"
#include "components/host/network_latency.h"
#include "components/host/nfs.h"
#include "components/host/os.h"
#include "components/host/pci.h"
#include "components/host/power_supply.h"
#include "components/host/systemd.h"
#include "components/host/tailscale.h"
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
using KernelLogRules = kmsg::ComponentRules (*)();

struct Entry {
  const char* name;
  Factory make;
  KernelLogRules kernel_log_rules = nullptr;  // the component learns from the kernel log
};

template <typename T>
Entry entry(const char* name, KernelLogRules rules = nullptr) {
  return {name, [](const ComponentContext& ctx) { return std::make_unique<T>(ctx); }, rules};
}

// Every component gpud has, by name, with its kernel-log rules. Adding a component means adding
// one line here.
const std::vector<Entry>& all_components() {
  static const std::vector<Entry> kAll = {
      entry<XidComponent>("accelerator-nvidia-error-xid", xid_kernel_log_rules),
      entry<SxidComponent>("accelerator-nvidia-error-sxid", sxid_kernel_log_rules),
      entry<InfinibandComponent>("accelerator-nvidia-infiniband", infiniband_kernel_log_rules),
      entry<NcclComponent>("accelerator-nvidia-nccl", nccl_kernel_log_rules),
      entry<PeermemComponent>("accelerator-nvidia-peermem", peermem_kernel_log_rules),
      entry<ContainerdComponent>("containerd"),
      entry<CpuComponent>("cpu", cpu_kernel_log_rules),
      entry<DiskComponent>("disk", disk_kernel_log_rules),
      entry<DockerComponent>("docker"),
      entry<FdComponent>("fd"),
      entry<FileComponent>("file"),
      entry<FuseComponent>("fuse"),
      entry<GpudComponent>("gpud"),
      entry<KernelModuleComponent>("kernel-module"),
      entry<KubeletComponent>("kubelet"),
      entry<LibraryComponent>("library"),
      entry<MemoryComponent>("memory", memory_kernel_log_rules),
      entry<NetworkLatencyComponent>("network-latency"),
      entry<NfsComponent>("nfs", nfs_kernel_log_rules),
      entry<OsComponent>("os", os_kernel_log_rules),
      entry<PowerSupplyComponent>("power-supply"),
      entry<SystemdComponent>("systemd"),
      entry<TailscaleComponent>("tailscale"),
      // NVIDIA GPUs
      entry<BadEnvsComponent>("accelerator-nvidia-bad-envs"),
      entry<FabricManagerComponent>("accelerator-nvidia-fabric-manager"),
      entry<GpmComponent>("accelerator-nvidia-gpm"),
      entry<GspFirmwareModeComponent>("accelerator-nvidia-gsp-firmware-mode"),
      entry<NvlinkComponent>("accelerator-nvidia-nvlink", nvlink_kernel_log_rules),
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
      entry<PciComponent>("pci", pci_kernel_log_rules),
  };
  return kAll;
}

}  // namespace

Result<void> register_all(Registry& registry, const ComponentContext& ctx) {
  for (const Entry& e : all_components()) {
    if (!component_enabled(e.name, ctx.config->components)) continue;
    if (auto r = registry.add(e.make(ctx)); !r) return r;
  }
  return {};
}

std::vector<std::string> known_names() {
  std::vector<std::string> out;
  for (const Entry& e : all_components()) out.emplace_back(e.name);
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<kmsg::ComponentRules> kernel_log_rules(const Registry& registry) {
  std::vector<kmsg::ComponentRules> out;
  for (const Entry& e : all_components()) {
    if (e.kernel_log_rules == nullptr || registry.find(e.name) == nullptr) continue;
    out.push_back(e.kernel_log_rules());
    const auto* c = dynamic_cast<const Component*>(registry.find(e.name));
    if (c != nullptr && c->annotates_kernel_log())
      out.back().annotate = [c](kmsg::Match& m, const kmsg::MatchTime& t) {
        c->annotate_kernel_log_match(m, t);
      };
  }
  return out;
}

// What lists through runtimes::ContainerSource (and so fills the directory attribution reads).
constexpr std::string_view kCheckedFirst[] = {"containerd", "docker", "kubelet"};

std::vector<std::string> checked_first() {
  return {std::begin(kCheckedFirst), std::end(kCheckedFirst)};
}

std::vector<gpud::Component*> check_order(std::vector<gpud::Component*> components) {
  auto first = [](const gpud::Component* c) {
    return std::find(std::begin(kCheckedFirst), std::end(kCheckedFirst), c->name()) !=
           std::end(kCheckedFirst);
  };
  std::stable_partition(components.begin(), components.end(), first);
  return components;
}

std::vector<kmsg::ComponentRules> all_kernel_log_rules() {
  std::vector<kmsg::ComponentRules> out;
  for (const Entry& e : all_components())
    if (e.kernel_log_rules != nullptr) out.push_back(e.kernel_log_rules());
  return out;
}

}  // namespace gpud::components
