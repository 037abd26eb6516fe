#include "catalog/xid_catalog.h"

#include "catalog/catalog_rows.h"

namespace gpud::catalog {

bool XidInfo::reboot_class() const {
  return !repair_actions.empty() && repair_actions.front() == RepairAction::kRebootSystem;
}

namespace {

struct XidRow {
  int code;
  std::string_view mnemonic;
  std::string_view description;
  EventType type;
  RepairActionList actions;
  std::string_view immediate_resolution;
  std::string_view investigatory_resolution;
  bool known;
};

constexpr XidRow kTable[] = {
#include "catalog/xid_table.inc"
};
constexpr auto kRows = sorted_by_code(kTable);

XidInfo to_info(const XidRow& r) {
  return {r.code,
          std::string(r.mnemonic),
          std::string(r.description),
          r.type,
          r.actions.to_vector(),
          std::string(r.immediate_resolution),
          std::string(r.investigatory_resolution),
          r.known};
}

}  // namespace

const std::vector<XidInfo>& xid_catalog() {
  static const std::vector<XidInfo> kInfos = [] {
    std::vector<XidInfo> v;
    for (const XidRow& r : kRows) v.push_back(to_info(r));
    return v;
  }();
  return kInfos;
}

std::optional<XidInfo> find_xid(int code) {
  if (const XidRow* r = find_row(kRows, code)) return to_info(*r);
  return std::nullopt;
}

XidInfo lookup_xid(int code) {
  if (auto e = find_xid(code)) return std::move(*e);
  XidInfo u;
  u.code = code;
  u.description = "unknown Xid " + std::to_string(code);
  u.type = EventType::kWarning;
  u.known = false;
  return u;
}

}  // namespace gpud::catalog
