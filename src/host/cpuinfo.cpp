#include "host/cpuinfo.h"

#include "host/host_fs.h"

namespace gpud::host {

CpuInfoSummary parse_cpuinfo_summary(std::string_view text) {
  CpuInfoSummary out;
  for (std::string_view line : split_lines(text)) {
    auto colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    std::string_view key = trim(line.substr(0, colon));
    std::string_view value = trim(line.substr(colon + 1));
    if (key == "processor") {
      ++out.logical_cores;
    } else if (out.model_name.empty() &&
               (key == "model name" || key == "Model" || key == "cpu model")) {
      out.model_name = std::string(value);
    } else if (out.vendor_id.empty() && (key == "vendor_id" || key == "CPU implementer")) {
      out.vendor_id = std::string(value);
    }
  }
  return out;
}

}  // namespace gpud::host
