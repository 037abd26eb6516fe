// Parser for /proc/meminfo: the totals the memory component reports, in bytes.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "core/result.h"

namespace gpud::host {

struct MemInfo {
  uint64_t total_bytes = 0;
  uint64_t free_bytes = 0;
  uint64_t available_bytes = 0;
  uint64_t buffers_bytes = 0;
  uint64_t cached_bytes = 0;
  uint64_t shmem_bytes = 0;
  uint64_t sreclaimable_bytes = 0;
  uint64_t swap_total_bytes = 0;
  uint64_t swap_free_bytes = 0;
  // The vmalloc address space and what is mapped in it; absent when the line is. VmallocUsed
  // reads 0 on kernels that do not count it (4.4 stopped; later kernels count vmalloc pages again).
  std::optional<uint64_t> vmalloc_total_bytes;
  std::optional<uint64_t> vmalloc_used_bytes;
  // Kernels before 3.14 have no MemAvailable; available is then estimated as free + buffers +
  // cached.
  bool available_estimated = false;

  uint64_t used_bytes() const {
    return total_bytes > available_bytes ? total_bytes - available_bytes : 0;
  }
  double used_percent() const;  // used / total * 100; 0 when total is 0
};

// Values carrying "kB" are converted to bytes. Fails when MemTotal is missing or unparsable.
[[nodiscard]] Result<MemInfo> parse_meminfo(std::string_view text);

}  // namespace gpud::host
