// The NVIDIA Xid catalog as GPUd uses it (Appendix A of gpud-behaviour.md): code, mnemonic,
// description, event type and repair actions, as a data table with lookup by code.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/health.h"

namespace gpud::catalog {

struct XidInfo {
  int code = 0;
  std::string mnemonic;  // NVIDIA catalog mnemonic, e.g. ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS
  std::string description;  // GPUd description, e.g. "GPU has fallen off the bus"
  EventType type = EventType::kWarning;
  std::vector<RepairAction> repair_actions;  // only the first is used by the state machine
  std::string immediate_resolution;          // NVIDIA bucket, informational ("RESTART_BM")
  std::string investigatory_resolution;
  bool known = true;  // false: synthesized for a code the catalog lacks

  // The first repair action is REBOOT_SYSTEM: a reboot clears it, repeats escalate.
  bool reboot_class() const;
};

// Every entry of the catalog, ordered by code.
const std::vector<XidInfo>& xid_catalog();
// The catalog entry; nullopt when the code is not in the catalog.
std::optional<XidInfo> find_xid(int code);
// The catalog entry, or a synthesized Warning entry "unknown Xid N" without actions.
XidInfo lookup_xid(int code);

}  // namespace gpud::catalog
