#include "app/bus_identities.h"

#include "core/pci_address.h"

namespace gpud::app {

kmsg::BusIdentityTable bus_identity_table(const nvml::NvmlSnapshot* nvml,
                                          const std::vector<std::string>& sysfs_nvidia_devices) {
  kmsg::BusIdentityTable t;
  for (const std::string& dev : sysfs_nvidia_devices)
    t.uuid_by_bus.emplace(normalize_pci_bus_id(dev), std::string());
  if (nvml != nullptr)
    for (const nvml::GpuSnapshot& g : nvml->gpus)
      if (g.pci_bus_id.ok())
        t.uuid_by_bus.insert_or_assign(normalize_pci_bus_id(g.pci_bus_id.value),
                                       g.uuid.ok() ? g.uuid.value : std::string());
  return t;
}

}  // namespace gpud::app
