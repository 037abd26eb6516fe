// What an NVIDIA product can do, by its name (GPUd's capability tables: longest case-insensitive
// substring match) and by its architecture: the one table every NVIDIA component asks.
#pragma once

#include <string_view>

namespace gpud::catalog {

struct ProductCaps {
  // Memory-error management: a100, b100, b200, gb200, h100, h200 have all three; a10 has row
  // remapping only.
  bool row_remapping = false;
  bool error_containment = false;
  bool dynamic_page_offlining = false;
  // a100, b100, b200, h100, h200 run a fabric manager (not gb200, gh200, a10, nor any PCIe card).
  bool fabric_manager = false;
  // NVML's GetGpuFabricInfo answers on gb200, h100, h200 (not gh200, nor any PCIe card).
  bool fabric_state = false;
};

ProductCaps product_caps(std::string_view product_name);

// Page retirement (NVML's retired pages) exists up to Volta/Turing; Ampere and later remap rows.
bool architecture_retires_pages(std::string_view architecture);

}  // namespace gpud::catalog
