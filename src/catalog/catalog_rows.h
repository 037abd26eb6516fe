// What the generated catalog tables (*_table.inc) are compiled into: rows of read-only data, sorted
// at compile time, so a catalog costs no start-up code and no heap until a code is looked up.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <initializer_list>
#include <vector>

#include "core/health.h"

namespace gpud::catalog {

// A row's repair actions ("{}" or "{RepairAction::kRebootSystem, ...}" in the tables).
struct RepairActionList {
  std::array<RepairAction, 3> items{};
  size_t size = 0;
  constexpr RepairActionList() = default;
  constexpr RepairActionList(std::initializer_list<RepairAction> actions) {  // NOLINT
    for (RepairAction a : actions) items[size++] = a;  // a fourth action fails to compile
  }
  std::vector<RepairAction> to_vector() const { return {items.begin(), items.begin() + size}; }
};

// The rows ordered by code, computed by the compiler.
template <typename Row, size_t N>
constexpr std::array<Row, N> sorted_by_code(const Row (&rows)[N]) {
  std::array<Row, N> out{};
  std::copy(rows, rows + N, out.begin());
  std::sort(out.begin(), out.end(), [](const Row& a, const Row& b) { return a.code < b.code; });
  return out;
}

// The row with `code`, or nullptr.
template <typename Row, size_t N>
const Row* find_row(const std::array<Row, N>& rows, int code) {
  auto it = std::lower_bound(rows.begin(), rows.end(), code,
                             [](const Row& r, int c) { return r.code < c; });
  return it != rows.end() && it->code == code ? &*it : nullptr;
}

}  // namespace gpud::catalog
