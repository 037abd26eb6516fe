#include "kmsg/bus_identity_table.h"

#include "core/pci_address.h"

namespace gpud::kmsg {

BusIdentity BusIdentityTable::identify(std::string_view pci_bus_id) const {
  BusIdentity id;
  if (auto it = uuid_by_bus.find(normalize_pci_bus_id(pci_bus_id)); it != uuid_by_bus.end()) {
    id.known = true;
    id.uuid = it->second;
  }
  return id;
}

}  // namespace gpud::kmsg
