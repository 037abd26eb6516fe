#include "catalog/sxid_catalog.h"

#include "catalog/catalog_rows.h"

namespace gpud::catalog {

bool SxidInfo::reboot_class() const {
  return !repair_actions.empty() && repair_actions.front() == RepairAction::kRebootSystem;
}

namespace {

struct SxidRow {
  int code;
  std::string_view name;
  EventType type;
  RepairActionList actions;
  std::string_view category;
  bool known;
};

constexpr SxidRow kTable[] = {
#include "catalog/sxid_table.inc"
};
constexpr auto kRows = sorted_by_code(kTable);

SxidInfo to_info(const SxidRow& r) {
  return {r.code, std::string(r.name), r.type, r.actions.to_vector(), std::string(r.category),
          r.known};
}

}  // namespace

const std::vector<SxidInfo>& sxid_catalog() {
  static const std::vector<SxidInfo> kInfos = [] {
    std::vector<SxidInfo> v;
    for (const SxidRow& r : kRows) v.push_back(to_info(r));
    return v;
  }();
  return kInfos;
}

std::optional<SxidInfo> find_sxid(int code) {
  if (const SxidRow* r = find_row(kRows, code)) return to_info(*r);
  return std::nullopt;
}

SxidInfo lookup_sxid(int code) {
  if (auto e = find_sxid(code)) return std::move(*e);
  SxidInfo u;
  u.code = code;
  u.name = "unknown SXid " + std::to_string(code);
  u.known = false;
  return u;
}

}  // namespace gpud::catalog
