#include "components/nvidia/bad_envs.h"

#include <algorithm>

#include "nvml/source.h"

extern char** environ;  // NOLINT: POSIX

namespace gpud::components {
namespace {

std::string unquote(std::string_view v) {
  v = trim(v);
  if (v.size() >= 2 && (v.front() == '"' || v.front() == '\'') && v.back() == v.front())
    v = v.substr(1, v.size() - 2);
  return std::string(v);
}

void check_assignment(std::string_view kv, const std::string& where,
                      std::vector<BadEnvFinding>& out) {
  size_t eq = kv.find('=');
  if (eq == std::string_view::npos) return;
  auto key = trim(kv.substr(0, eq));
  if (is_bad_cuda_env_var(key))
    out.push_back({std::string(key), unquote(kv.substr(eq + 1)), where});
}

// Splits systemd's space-separated, optionally double-quoted assignments.
std::vector<std::string> split_systemd_words(std::string_view s) {
  std::vector<std::string> out;
  std::string cur;
  bool in_quote = false, any = false;
  for (char c : s) {
    if (c == '"') {
      in_quote = !in_quote;
      any = true;
    } else if ((c == ' ' || c == '\t') && !in_quote) {
      if (any) out.push_back(cur);
      cur.clear();
      any = false;
    } else {
      cur += c;
      any = true;
    }
  }
  if (any) out.push_back(cur);
  return out;
}

}  // namespace

std::vector<BadEnvFinding> bad_envs_in_environment_file(std::string_view text,
                                                        const std::string& where) {
  std::vector<BadEnvFinding> out;
  for (auto line : host::split_lines(text)) {
    line = trim(line);
    if (line.empty() || line.front() == '#') continue;
    if (line.substr(0, 7) == "export ") line = trim(line.substr(7));
    check_assignment(line, where, out);
  }
  return out;
}

std::vector<BadEnvFinding> bad_envs_in_systemd_conf(std::string_view text,
                                                    const std::string& where) {
  std::vector<BadEnvFinding> out;
  constexpr std::string_view kKey = "DefaultEnvironment=";
  for (auto line : host::split_lines(text)) {
    line = trim(line);
    if (line.substr(0, kKey.size()) != kKey) continue;
    for (const auto& w : split_systemd_words(line.substr(kKey.size())))
      check_assignment(w, where, out);
  }
  return out;
}

std::vector<BadEnvFinding> bad_envs_in_list(const std::vector<std::string>& entries,
                                            const std::string& where) {
  std::vector<BadEnvFinding> out;
  for (const auto& e : entries) check_assignment(e, where, out);
  return out;
}

std::vector<BadEnvFinding> collect_bad_envs(const host::HostFs& fs, char** own_environ) {
  std::vector<BadEnvFinding> out;
  auto append = [&out](std::vector<BadEnvFinding> v) { out.insert(out.end(), v.begin(), v.end()); };
  if (auto t = fs.read("/etc/environment", 1 << 20))
    append(bad_envs_in_environment_file(*t, "/etc/environment"));
  if (auto t = fs.read("/etc/systemd/system.conf", 1 << 20))
    append(bad_envs_in_systemd_conf(*t, "/etc/systemd/system.conf"));
  if (auto names = fs.list("/etc/systemd/system.conf.d")) {
    std::sort(names->begin(), names->end());
    for (const auto& n : *names) {
      if (n.size() < 5 || n.substr(n.size() - 5) != ".conf") continue;
      std::string p = "/etc/systemd/system.conf.d/" + n;
      if (auto t = fs.read(p, 1 << 20)) append(bad_envs_in_systemd_conf(*t, p));
    }
  }
  std::vector<std::string> own;
  for (char** e = own_environ; e != nullptr && *e != nullptr; ++e) own.emplace_back(*e);
  append(bad_envs_in_list(own, "gpud environment"));
  return out;
}

NvidiaVerdict evaluate_bad_envs(const std::vector<BadEnvFinding>& findings) {
  NvidiaVerdict v;
  v.healthy_reason = "no bad CUDA environment variables set";
  v.reason_prefix = "bad CUDA environment variables set: ";
  v.action_description = "unset the variables machine-wide";
  nlohmann::json list = nlohmann::json::array();
  // Machine-wide, not per GPU: the table is the detail's text.
  std::vector<std::vector<std::string>> rows = {{"VARIABLE", "VALUE", "WHERE"}};
  for (const auto& f : findings) {
    list.push_back({{"variable", f.variable}, {"value", f.value}, {"where", f.where}});
    rows.push_back({f.variable, f.value, f.where});
    v.add(Health::kDegraded, f.variable + " set in " + f.where, RepairAction::kCheckUserAppAndGpu);
  }
  v.data = {{"bad_env_vars", list}};
  v.detail_preface = findings.empty() ? "no bad CUDA environment variables set machine-wide\n"
                                      : format_table(rows);
  return v;
}

BadEnvsComponent::BadEnvsComponent(const ComponentContext& ctx)
    : Component(ctx), fs_(ctx.config->host_root) {}

std::vector<std::string> BadEnvsComponent::tags() const {
  return {"accelerator", "gpu", "nvidia", std::string(kBadEnvsName)};
}

bool BadEnvsComponent::supported() const {
  if (ctx().nvidia_pci_present) return true;
  return ctx().nvidia != nullptr && ctx().nvidia->status() != nvml::NvmlStatus::kNotFound;
}

CheckResult BadEnvsComponent::check() {
  return render_verdict(name(), evaluate_bad_envs(collect_bad_envs(fs_, environ)));
}

}  // namespace gpud::components
