// Human-readable byte counts for reasons and `gpud scan` detail blocks.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <string>

namespace gpud::host {

// Binary units with one decimal: "512 B", "1.5 KiB", "312.0 MiB", "23.5 GiB".
inline std::string human_bytes(uint64_t b) {
  static constexpr const char* kUnits[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  if (b < 1024) return fmt::format("{} B", b);
  double v = static_cast<double>(b) / 1024;
  size_t u = 0;
  while (v >= 1024 && u + 1 < std::size(kUnits)) {
    v /= 1024;
    ++u;
  }
  return fmt::format("{:.1f} {}", v, kUnits[u]);
}

}  // namespace gpud::host
