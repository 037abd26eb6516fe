#include "host/cpuinfo.h"

#include <charconv>
#include <optional>

#include "host/host_fs.h"

namespace gpud::host {

namespace {

// "0x41", "0xd4f": the hexadecimal codes arm64's /proc/cpuinfo prints.
std::optional<uint32_t> parse_hex_code(std::string_view v) {
  if (v.size() < 3 || v[0] != '0' || (v[1] != 'x' && v[1] != 'X')) return std::nullopt;
  uint32_t out = 0;
  auto [end, ec] = std::from_chars(v.data() + 2, v.data() + v.size(), out, 16);
  if (ec != std::errc() || end != v.data() + v.size()) return std::nullopt;
  return out;
}

struct ArmPart {
  uint32_t implementer;
  uint32_t part;
  std::string_view name;
};

// The server and common cores (util-linux sys-utils/lscpu-arm.c, the kernel's
// arch/arm64/include/asm/cputype.h).
constexpr ArmPart kArmParts[] = {
    {0x41, 0xd03, "Cortex-A53"},  {0x41, 0xd07, "Cortex-A57"},   {0x41, 0xd08, "Cortex-A72"},
    {0x41, 0xd0b, "Cortex-A76"},  {0x41, 0xd0c, "Neoverse-N1"},  {0x41, 0xd40, "Neoverse-V1"},
    {0x41, 0xd49, "Neoverse-N2"}, {0x41, 0xd4f, "Neoverse-V2"},  {0x41, 0xd83, "Neoverse-V3AE"},
    {0x41, 0xd84, "Neoverse-V3"}, {0x41, 0xd8e, "Neoverse-N3"},  {0x4e, 0x003, "Denver 2"},
    {0xc0, 0xac4, "Ampere-1a"},   {0x48, 0xd01, "TaiShan-v110"}, {0x43, 0x0af, "ThunderX2 99xx"},
    {0x50, 0x000, "X-Gene"},      {0x51, 0xc00, "Falkor"},
};

}  // namespace

std::string_view arm_implementer_name(uint32_t implementer) {
  switch (implementer) {
    case 0x41: return "ARM";
    case 0x42: return "Broadcom";
    case 0x43: return "Cavium";
    case 0x46: return "Fujitsu";
    case 0x48: return "HiSilicon";
    case 0x4e: return "NVIDIA";
    case 0x50: return "APM";
    case 0x51: return "Qualcomm";
    case 0x61: return "Apple";
    case 0xc0: return "Ampere";
    default: return "";
  }
}

std::string_view arm_part_name(uint32_t implementer, uint32_t part) {
  for (const ArmPart& p : kArmParts)
    if (p.implementer == implementer && p.part == part) return p.name;
  return "";
}

CpuInfoSummary parse_cpuinfo_summary(std::string_view text) {
  CpuInfoSummary out;
  std::string x86_model, other_model, implementer_text;
  std::optional<uint32_t> implementer, part;
  for (std::string_view line : split_lines(text)) {
    auto colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    std::string_view key = trim(line.substr(0, colon));
    std::string_view value = trim(line.substr(colon + 1));
    if (key == "processor") {
      ++out.logical_cores;
    } else if (key == "model name") {
      if (x86_model.empty()) x86_model = std::string(value);
    } else if (key == "Model" || key == "cpu model") {
      if (other_model.empty()) other_model = std::string(value);
    } else if (key == "vendor_id") {
      if (out.vendor_id.empty()) out.vendor_id = std::string(value);
    } else if (key == "CPU implementer") {
      // The first core's: a big.LITTLE machine lists several, the boot core first.
      if (!implementer && implementer_text.empty()) {
        implementer_text = std::string(value);
        implementer = parse_hex_code(value);
      }
    } else if (key == "CPU part") {
      if (!part) part = parse_hex_code(value);
    }
  }
  std::string_view part_name;
  if (implementer && part) part_name = arm_part_name(*implementer, *part);
  if (!x86_model.empty()) {
    out.model_name = std::move(x86_model);
  } else if (!part_name.empty()) {
    out.model_name = std::string(part_name);
  } else {
    out.model_name = std::move(other_model);
  }
  if (out.vendor_id.empty() && !implementer_text.empty()) {
    std::string_view name = implementer ? arm_implementer_name(*implementer) : "";
    out.vendor_id = name.empty() ? implementer_text : std::string(name);
  }
  return out;
}

}  // namespace gpud::host
