#include "catalog/sxid_catalog.h"

#include <algorithm>

namespace gpud::catalog {

bool SxidInfo::reboot_class() const {
  return !repair_actions.empty() && repair_actions.front() == RepairAction::kRebootSystem;
}

const std::vector<SxidInfo>& sxid_catalog() {
  static const std::vector<SxidInfo> kTable = [] {
    std::vector<SxidInfo> v = {
#include "catalog/sxid_table.inc"
    };
    std::sort(v.begin(), v.end(),
              [](const SxidInfo& a, const SxidInfo& b) { return a.code < b.code; });
    return v;
  }();
  return kTable;
}

const SxidInfo* find_sxid(int code) {
  const auto& t = sxid_catalog();
  auto it = std::lower_bound(t.begin(), t.end(), code,
                             [](const SxidInfo& e, int c) { return e.code < c; });
  return it != t.end() && it->code == code ? &*it : nullptr;
}

SxidInfo lookup_sxid(int code) {
  if (const SxidInfo* e = find_sxid(code)) return *e;
  SxidInfo u;
  u.code = code;
  u.name = "unknown SXid " + std::to_string(code);
  u.known = false;
  return u;
}

}  // namespace gpud::catalog
