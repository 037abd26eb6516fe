#include "host/modules.h"

namespace gpud::host {

std::vector<std::string> parse_proc_modules(std::string_view text) {
  std::vector<std::string> out;
  for (std::string_view line : split_lines(text)) {
    auto f = split_fields(line);
    if (!f.empty()) out.emplace_back(f[0]);
  }
  return out;
}

Result<std::vector<std::string>> read_loaded_modules(const HostFs& fs) {
  auto text = fs.read("/proc/modules");
  if (!text) return text.error();
  return parse_proc_modules(*text);
}

std::string normalize_module_name(std::string_view name) {
  std::string out(trim(name));
  for (char& c : out)
    if (c == '-') c = '_';
  return out;
}

}  // namespace gpud::host
