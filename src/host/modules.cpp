#include "host/modules.h"

#include "core/parse_number.h"

namespace gpud::host {

std::vector<std::string> parse_proc_modules(std::string_view text) {
  std::vector<std::string> out;
  for (std::string_view line : split_lines(text)) {
    auto f = split_fields(line);
    if (!f.empty()) out.emplace_back(f[0]);
  }
  return out;
}

std::vector<LoadedModule> parse_proc_modules_table(std::string_view text) {
  std::vector<LoadedModule> out;
  for (std::string_view line : split_lines(text)) {
    auto f = split_fields(line);
    if (f.size() < 4) continue;
    LoadedModule m;
    m.name = std::string(f[0]);
    m.use_count = f[2] == "-" ? -1 : parse_integer<int64_t>(f[2]).value_or(-1);
    std::string_view deps = f[3];
    size_t start = 0;
    while (deps != "-" && start < deps.size()) {
      size_t comma = deps.find(',', start);
      if (comma == std::string_view::npos) comma = deps.size();
      if (comma > start) m.used_by.emplace_back(deps.substr(start, comma - start));
      start = comma + 1;
    }
    out.push_back(std::move(m));
  }
  return out;
}

Result<std::vector<LoadedModule>> read_loaded_modules_table(const HostFs& fs) {
  auto text = fs.read("/proc/modules");
  if (!text) return text.error();
  return parse_proc_modules_table(*text);
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
