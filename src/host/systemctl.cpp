#include "host/systemctl.h"

#include <map>

#include "core/parse_number.h"
#include "core/strings.h"
#include "host/command.h"

namespace gpud::host {

std::string unit_name(std::string_view name) {
  static constexpr std::string_view kSuffixes[] = {".service", ".socket", ".target",   ".timer",
                                                   ".mount",   ".path",   ".slice",    ".scope",
                                                   ".device",  ".swap",   ".automount"};
  for (std::string_view s : kSuffixes)
    if (name.size() > s.size() && name.substr(name.size() - s.size()) == s)
      return std::string(name);
  return std::string(name) + ".service";
}

std::vector<UnitState> parse_systemctl_show(std::string_view text,
                                            const std::vector<std::string>& units) {
  // Blocks of Key=Value lines separated by empty lines.
  std::vector<std::map<std::string, std::string>> blocks(1);
  for (std::string_view raw : split_lines(text)) {
    std::string_view line = trim(raw);
    if (line.empty()) {
      if (!blocks.back().empty()) blocks.emplace_back();
      continue;
    }
    size_t eq = line.find('=');
    if (eq == std::string_view::npos || eq == 0) continue;
    blocks.back()[std::string(line.substr(0, eq))] = std::string(line.substr(eq + 1));
  }
  if (blocks.back().empty()) blocks.pop_back();

  std::vector<UnitState> out;
  for (size_t i = 0; i < units.size(); ++i) {
    UnitState u;
    u.id = units[i];
    if (i >= blocks.size()) {
      u.error = "systemctl show printed nothing for it";
      out.push_back(std::move(u));
      continue;
    }
    const auto& b = blocks[i];
    auto get = [&b](const char* key) {
      auto it = b.find(key);
      return it == b.end() ? std::string() : it->second;
    };
    std::vector<std::string> errors;
    if (auto id = get("Id"); !id.empty() && id != units[i])
      errors.push_back("systemctl show answered for " + id);
    u.load_state = get("LoadState");
    u.active_state = get("ActiveState");
    u.sub_state = get("SubState");
    u.state_changed = get("StateChangeTimestamp");
    if (u.load_state.empty()) errors.push_back("no LoadState");
    if (u.active_state.empty()) errors.push_back("no ActiveState");
    if (auto it = b.find("NRestarts"); it != b.end() && !it->second.empty()) {
      if (auto n = parse_integer<uint64_t>(it->second); n)
        u.n_restarts = *n;
      else
        errors.push_back("NRestarts not a number: \"" + it->second.substr(0, 40) + "\"");
    }
    u.error = join(errors, ", ");
    out.push_back(std::move(u));
  }
  return out;
}

Result<std::vector<UnitState>> systemctl_show(const std::string& systemctl,
                                              std::string_view search_path,
                                              const std::vector<std::string>& units,
                                              std::chrono::milliseconds timeout) {
  std::vector<std::string> argv{systemctl, "show", "--no-pager", "-p",
                                std::string(kUnitProperties)};
  std::vector<std::string> names;
  for (const auto& u : units) names.push_back(unit_name(u));
  argv.insert(argv.end(), names.begin(), names.end());
  auto r = run_command(argv, search_path, timeout);
  if (!r) return r.error();
  if (r->exit_code != 0) {
    std::string err(trim(r->err));
    return make_error("systemctl show exited with status " + std::to_string(r->exit_code) +
                      (err.empty() ? "" : ": " + err.substr(0, 200)));
  }
  return parse_systemctl_show(r->out, names);
}

bool systemd_running(const HostFs& fs) { return fs.exists("/run/systemd/system"); }

}  // namespace gpud::host
