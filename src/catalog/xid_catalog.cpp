#include "catalog/xid_catalog.h"

#include <algorithm>

namespace gpud::catalog {

bool XidInfo::reboot_class() const {
  return !repair_actions.empty() && repair_actions.front() == RepairAction::kRebootSystem;
}

const std::vector<XidInfo>& xid_catalog() {
  static const std::vector<XidInfo> kTable = [] {
    std::vector<XidInfo> v = {
#include "catalog/xid_table.inc"
    };
    std::sort(v.begin(), v.end(),
              [](const XidInfo& a, const XidInfo& b) { return a.code < b.code; });
    return v;
  }();
  return kTable;
}

const XidInfo* find_xid(int code) {
  const auto& t = xid_catalog();
  auto it = std::lower_bound(t.begin(), t.end(), code,
                             [](const XidInfo& e, int c) { return e.code < c; });
  return it != t.end() && it->code == code ? &*it : nullptr;
}

XidInfo lookup_xid(int code) {
  if (const XidInfo* e = find_xid(code)) return *e;
  XidInfo u;
  u.code = code;
  u.description = "unknown Xid " + std::to_string(code);
  u.type = EventType::kWarning;
  u.known = false;
  return u;
}

}  // namespace gpud::catalog
