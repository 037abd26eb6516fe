// NVLink5 Xid 144-150 decoding (Appendix C of gpud-behaviour.md, NVIDIA's "XID 144-150 Decode"
// sheet): maps the unit, intrinfo bits and error status of a kernel line to severity and action.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "core/health.h"

namespace gpud::catalog {

struct NvlinkRule {
  int xid;
  std::string_view unit;  // aliases separated by '/', e.g. "NETIR_LINK_EVT/NETIR_LINK_DOWN"
  std::string_view intrinfo_pattern;  // 32 chars, bit 31 first: '0', '1' or '-' (don't care)
  int sub_code;                       // (intrinfo >> 20) & 0x3F the pattern implies
  uint32_t error_status;
  std::string_view resolution;     // NVIDIA immediate bucket ("RESET_GPU", "IGNORE", ...)
  std::string_view investigatory;  // NVIDIA investigatory bucket
  std::string_view severity;       // "Fatal", "Non-fatal", "Link Fatal", "Fatal**", ...
};

// All rows of the decode table.
std::span<const NvlinkRule> nvlink_rules();

struct NvlinkDecoded {
  const NvlinkRule* rule = nullptr;  // nullptr: no row matched; the catalog's defaults apply
  int sub_code = 0;
  EventType type = EventType::kWarning;
  RepairAction action = RepairAction::kRebootSystem;
  std::string description;  // set by the operational overrides (Xid 149 sub-codes 4 and 10)
  std::string investigatory_hint;
};

// True when `value` fits a 32-char '0'/'1'/'-' pattern (bit 31 first).
bool intrinfo_matches(std::string_view pattern, uint32_t value);
// Upper-case, '-' to '_', other non-alphanumerics dropped: "tlw-rx" -> "TLW_RX".
std::string normalize_unit(std::string_view unit);
// Event type for a severity string of the sheet, falling back to the resolution bucket.
EventType nvlink_severity_type(std::string_view severity, std::string_view bucket);
// Repair action for a resolution bucket (RESET_GPU -> REBOOT_SYSTEM, CONTACT_SUPPORT ->
// HARDWARE_INSPECTION, IGNORE -> IGNORE_NO_ACTION_REQUIRED, ...).
RepairAction nvlink_bucket_action(std::string_view bucket);
// Decodes one NVLink5 Xid. `log_fatal` is the Fatal/Nonfatal word of the line; the resulting
// type is never below it.
NvlinkDecoded decode_nvlink(int xid, std::string_view unit, uint32_t intrinfo,
                            uint32_t error_status, bool log_fatal);

}  // namespace gpud::catalog
