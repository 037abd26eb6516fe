#include "catalog/nvidia_products.h"

#include <array>
#include <cctype>
#include <string>

namespace gpud::catalog {
namespace {

// The longest of `keys` contained in `name` (lower case), or "".
template <size_t N>
std::string_view longest_match(const std::string& name,
                               const std::array<std::string_view, N>& keys) {
  std::string_view best;
  for (std::string_view k : keys)
    if (name.find(k) != std::string::npos && k.size() > best.size()) best = k;
  return best;
}

}  // namespace

ProductCaps product_caps(std::string_view product_name) {
  std::string p;
  for (char c : product_name)
    p.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  ProductCaps caps;
  constexpr std::array<std::string_view, 7> kMemory = {"a100", "b100", "b200", "gb200",
                                                       "h100", "h200", "a10"};
  const std::string_view memory = longest_match(p, kMemory);
  if (!memory.empty()) {
    caps.row_remapping = true;
    caps.error_containment = caps.dynamic_page_offlining = memory != "a10";
  }
  const bool pcie = p.find("pcie") != std::string::npos;
  constexpr std::array<std::string_view, 8> kFabric = {"a100", "b100",  "b200",  "h100",
                                                       "h200", "gb200", "gh200", "a10"};
  const std::string_view fabric = longest_match(p, kFabric);
  caps.fabric_manager = !pcie && (fabric == "a100" || fabric == "b100" || fabric == "b200" ||
                                  fabric == "h100" || fabric == "h200");
  constexpr std::array<std::string_view, 3> kState = {"gb200", "h100", "h200"};
  caps.fabric_state =
      !pcie && p.find("gh200") == std::string::npos && !longest_match(p, kState).empty();
  return caps;
}

bool architecture_retires_pages(std::string_view a) {
  return a == "volta" || a == "turing" || a == "pascal" || a == "maxwell" || a == "kepler" ||
         a == "fermi" || a == "tesla";
}

}  // namespace gpud::catalog
