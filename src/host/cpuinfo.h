// CpuInfo: the CPU model, vendor and logical core count from /proc/cpuinfo, for /machine-info's
// cpuInfo. x86 names them ("model name", "vendor_id"); arm64 (NVIDIA Grace, AWS Graviton, Ampere)
// only gives numbers ("CPU implementer", "CPU part"), which are named from the tables the kernel's
// and util-linux's lscpu use, as GPUd's cpuInfo does (gopsutil).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace gpud::host {

struct CpuInfoSummary {
  // "model name" (x86); on arm64 the core's name from "CPU implementer" and "CPU part"
  // ("Neoverse-V2" for Grace), else "Model" / "cpu model"; "" when none is known.
  std::string model_name;
  // "vendor_id" (x86); on arm64 the implementer's name ("ARM"), or its code ("0x41") when the
  // table does not know it.
  std::string vendor_id;
  int64_t logical_cores = 0;  // number of "processor" entries
};

CpuInfoSummary parse_cpuinfo_summary(std::string_view text);

// The names of an arm64 "CPU implementer" code and of a core ("CPU part" of that implementer);
// "" when unknown.
std::string_view arm_implementer_name(uint32_t implementer);
std::string_view arm_part_name(uint32_t implementer, uint32_t part);

}  // namespace gpud::host
