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
#include "components/nvidia/infiniband.h"
#include "components/nvidia/nccl.h"
#include "components/nvidia/peermem.h"
#include "components/nvidia/sxid.h"
#include "components/nvidia/xid.h"

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
      entry<KernelModuleComponent>("kernel-module"),
      entry<LibraryComponent>("library"),
      entry<MemoryComponent>("memory"),
      entry<NfsComponent>("nfs"),
      entry<OsComponent>("os"),
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
