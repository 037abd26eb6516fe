#include "host/meminfo.h"

#include <charconv>
#include <string>
#include <utility>

#include "host/host_fs.h"

namespace gpud::host {

double MemInfo::used_percent() const {
  if (total_bytes == 0) return 0;
  return 100.0 * static_cast<double>(used_bytes()) / static_cast<double>(total_bytes);
}

Result<MemInfo> parse_meminfo(std::string_view text) {
  MemInfo out;
  bool have_total = false, have_available = false;
  uint64_t vmalloc_total = 0, vmalloc_used = 0;
  for (std::string_view line : split_lines(text)) {
    auto colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    std::string_view key = line.substr(0, colon);
    const std::pair<std::string_view, uint64_t*> fields[] = {
        {"MemTotal", &out.total_bytes},
        {"MemFree", &out.free_bytes},
        {"MemAvailable", &out.available_bytes},
        {"Buffers", &out.buffers_bytes},
        {"Cached", &out.cached_bytes},
        {"Shmem", &out.shmem_bytes},
        {"SReclaimable", &out.sreclaimable_bytes},
        {"SwapTotal", &out.swap_total_bytes},
        {"SwapFree", &out.swap_free_bytes},
        {"VmallocTotal", &vmalloc_total},
        {"VmallocUsed", &vmalloc_used}};
    uint64_t* dst = nullptr;
    for (const auto& [name, field] : fields)
      if (key == name) dst = field;
    if (dst == nullptr) continue;
    if (key == "MemTotal") have_total = true;
    if (key == "MemAvailable") have_available = true;
    auto f = split_fields(line.substr(colon + 1));
    uint64_t v = 0;
    if (f.empty() || std::from_chars(f[0].data(), f[0].data() + f[0].size(), v).ec != std::errc())
      return make_error("/proc/meminfo: bad value for " + std::string(key));
    if (f.size() >= 2 && (f[1] == "kB" || f[1] == "KB" || f[1] == "kb")) v *= 1024;
    *dst = v;
    if (dst == &vmalloc_total) out.vmalloc_total_bytes = v;
    if (dst == &vmalloc_used) out.vmalloc_used_bytes = v;
  }
  if (!have_total) return make_error("/proc/meminfo: no MemTotal");
  if (!have_available) {
    out.available_bytes = out.free_bytes + out.buffers_bytes + out.cached_bytes;
    if (out.available_bytes > out.total_bytes) out.available_bytes = out.total_bytes;
    out.available_estimated = true;
  }
  return out;
}

}  // namespace gpud::host
