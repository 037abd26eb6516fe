// CpuInfo: the CPU model, vendor and logical core count from /proc/cpuinfo, for /machine-info's
// cpuInfo.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace gpud::host {

struct CpuInfoSummary {
  std::string model_name;     // "model name" (x86) or "Model" / "cpu model" elsewhere
  std::string vendor_id;      // "vendor_id" (x86) or "CPU implementer" (arm64)
  int64_t logical_cores = 0;  // number of "processor" entries
};

CpuInfoSummary parse_cpuinfo_summary(std::string_view text);

}  // namespace gpud::host
