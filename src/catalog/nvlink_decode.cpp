#include "catalog/nvlink_decode.h"

#include <array>
#include <cctype>
#include <vector>

#include "catalog/xid_catalog.h"

namespace gpud::catalog {
namespace {

constexpr NvlinkRule kRules[] = {
#include "catalog/nvlink_table.inc"
};

std::vector<std::string> unit_aliases(std::string_view unit) {
  std::vector<std::string> out;
  std::string cur;
  auto flush = [&] {
    if (!cur.empty()) out.push_back(normalize_unit(cur));
    cur.clear();
  };
  for (char c : unit) {
    if (c == '/' || c == ',' || c == '(' || c == ')' || c == ' ') {
      flush();
    } else {
      cur.push_back(c);
    }
  }
  flush();
  return out;
}

int rank(EventType t) {
  switch (t) {
    case EventType::kFatal: return 4;
    case EventType::kCritical: return 3;
    case EventType::kWarning: return 2;
    case EventType::kInfo: return 1;
    case EventType::kUnknown: return 0;
  }
  return 0;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

std::span<const NvlinkRule> nvlink_rules() { return kRules; }

bool intrinfo_matches(std::string_view pattern, uint32_t value) {
  if (pattern.size() != 32) return false;
  for (size_t i = 0; i < 32; ++i) {
    const bool bit = (value >> (31 - i)) & 1u;
    if (pattern[i] == '-') continue;
    if ((pattern[i] == '1') != bit) return false;
  }
  return true;
}

std::string normalize_unit(std::string_view unit) {
  std::string out;
  for (char c : unit) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '-' || c == '_') {
      out.push_back('_');
    } else if (std::isalnum(u)) {
      out.push_back(static_cast<char>(std::toupper(u)));
    }
  }
  return out;
}

EventType nvlink_severity_type(std::string_view severity, std::string_view bucket) {
  const std::string s = lower(severity);
  if (s == "fatal" || s == "fatal**" || s == "link fatal" || s == "link fatal?") {
    return EventType::kFatal;
  }
  if (s.rfind("non-fatal", 0) == 0) return EventType::kWarning;
  static constexpr std::array<std::string_view, 7> kFatalBuckets = {
      "CONTACT_SUPPORT", "CHECK_MECHANICALS", "WORKFLOW_NVLINK_ERR", "WORKFLOW_NVLINK5_ERR",
      "XID_154",         "XID_154_EVAL",      "RESTART_BM"};
  static constexpr std::array<std::string_view, 7> kCriticalBuckets = {
      "RESET_GPU",       "RESTART_APP",     "RESTART_VM", "CHECK_UVM",
      "WORKFLOW_XID_48", "WORKFLOW_XID_45", "UPDATE_SWFW"};
  for (auto b : kFatalBuckets)
    if (bucket == b) return EventType::kFatal;
  for (auto b : kCriticalBuckets)
    if (bucket == b) return EventType::kCritical;
  if (bucket.empty() || bucket == "IGNORE") return EventType::kInfo;
  return EventType::kWarning;
}

RepairAction nvlink_bucket_action(std::string_view b) {
  if (b == "CONTACT_SUPPORT" || b == "CHECK_MECHANICALS" || b == "WORKFLOW_NVLINK_ERR" ||
      b == "WORKFLOW_NVLINK5_ERR" || b == "XID_154" || b == "XID_154_EVAL") {
    return RepairAction::kHardwareInspection;
  }
  if (b == "RESET_GPU" || b == "RESTART_BM" || b == "RESTART_VM" || b == "CHECK_UVM") {
    return RepairAction::kRebootSystem;
  }
  if (b == "RESTART_APP" || b == "WORKFLOW_XID_45" || b == "WORKFLOW_XID_48" ||
      b == "UPDATE_SWFW") {
    return RepairAction::kCheckUserAppAndGpu;
  }
  return RepairAction::kIgnoreNoActionRequired;
}

NvlinkDecoded decode_nvlink(int xid, std::string_view unit, uint32_t intrinfo,
                            uint32_t error_status, bool log_fatal) {
  NvlinkDecoded d;
  d.sub_code = static_cast<int>((intrinfo >> 20) & 0x3Fu);
  const XidInfo base = lookup_xid(xid);
  d.type = base.type;
  d.action = base.repair_actions.empty() ? RepairAction::kIgnoreNoActionRequired
                                         : base.repair_actions.front();

  const auto log_units = unit_aliases(unit);
  for (const NvlinkRule& r : kRules) {
    if (r.xid != xid || r.error_status != error_status) continue;
    if (!intrinfo_matches(r.intrinfo_pattern, intrinfo)) continue;
    bool unit_ok = false;
    for (const auto& ra : unit_aliases(r.unit))
      for (const auto& la : log_units) unit_ok = unit_ok || ra == la;
    if (!unit_ok) continue;
    d.rule = &r;
    d.type = nvlink_severity_type(r.severity, r.resolution);
    d.action = nvlink_bucket_action(r.resolution);
    if (r.investigatory != "IGNORE" && r.investigatory != "CONTACT_SUPPORT") {
      d.investigatory_hint = std::string(r.investigatory);
    }
    break;
  }
  const EventType from_log = log_fatal ? EventType::kFatal : EventType::kWarning;
  if (rank(from_log) > rank(d.type)) d.type = from_log;

  if (xid == 149 && d.sub_code == 4) {
    d.type = EventType::kFatal;
    d.action = RepairAction::kHardwareInspection;
    d.description = "NETIR Link Event - Possible NVLink cartridge error (contact provider)";
  } else if (xid == 149 && d.sub_code == 10) {
    d.type = EventType::kFatal;
    d.action = RepairAction::kHardwareInspection;
    d.description = "Physical layer retransmission timeout";
  }
  return d;
}

}  // namespace gpud::catalog
