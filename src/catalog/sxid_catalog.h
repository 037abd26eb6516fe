// The NVSwitch SXid catalog as GPUd uses it (Appendix B of gpud-behaviour.md, from the Fabric
// Manager user guide), as a data table with lookup by code.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/health.h"

namespace gpud::catalog {

struct SxidInfo {
  int code = 0;
  std::string name;  // e.g. "LTSSM Fault Up"
  EventType type = EventType::kWarning;
  std::vector<RepairAction> repair_actions;  // only the first is used by the state machine
  std::string category;  // FM guide section, e.g. "Always fatal (D.6) – restart host"
  bool known = true;

  bool reboot_class() const;
};

const std::vector<SxidInfo>& sxid_catalog();
// The catalog entry; nullopt when the code is not in the catalog.
std::optional<SxidInfo> find_sxid(int code);
// The catalog entry, or a synthesized Warning entry "unknown SXid N".
SxidInfo lookup_sxid(int code);

}  // namespace gpud::catalog
