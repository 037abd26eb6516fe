#include "components/containers/containerd.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <glob.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "core/strings.h"
#include "core/time_util.h"
#include "host/command.h"
#include "host/proc_pid_stat.h"
#include "host/systemd_bus.h"
#include "host/unix_socket_owner.h"
#include "nvml/source.h"
#include "runtimes/container_directory.h"

namespace gpud::components {
namespace {

constexpr std::string_view kCriRuntimesV1 =
    "plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.nvidia";
constexpr std::string_view kCriRuntimesV2 =
    "plugins.\"io.containerd.cri.v1.runtime\".containerd.runtimes.nvidia";

// `line` without a trailing "# comment" (a '#' inside quotes is kept).
std::string_view strip_comment(std::string_view line) {
  char quote = 0;
  for (size_t i = 0; i < line.size(); ++i) {
    char c = line[i];
    if (quote != 0) {
      if (c == '\\' && quote == '"')
        ++i;
      else if (c == quote)
        quote = 0;
    } else if (c == '"' || c == '\'') {
      quote = c;
    } else if (c == '#') {
      return line.substr(0, i);
    }
  }
  return line;
}

// A TOML key path in one spelling: no blanks, single quotes as double quotes.
std::string normalize_key(std::string_view key) {
  std::string out;
  for (char c : key) {
    if (c == ' ' || c == '\t') continue;
    out.push_back(c == '\'' ? '"' : c);
  }
  return out;
}

// A key path with the quotes dropped around segments that need none (no '.'): k3s and rke2 write
// `runtimes."nvidia"`, which is `runtimes.nvidia` to TOML.
std::string unquote_segments(const std::string& key) {
  std::string out;
  for (size_t i = 0; i < key.size(); ++i) {
    if (key[i] != '"') {
      out.push_back(key[i]);
      continue;
    }
    size_t end = key.find('"', i + 1);
    if (end == std::string::npos) {
      out.append(key, i, std::string::npos);
      break;
    }
    std::string_view inner(key.data() + i + 1, end - i - 1);
    if (inner.find('.') == std::string_view::npos && !inner.empty())
      out.append(inner);
    else
      out.append(key, i, end - i + 1);
    i = end;
  }
  return out;
}

bool is_or_below(std::string_view key, std::string_view table) {
  return key == table || (key.size() > table.size() && key.substr(0, table.size()) == table &&
                          key[table.size()] == '.');
}

std::vector<std::string> split_lines_copy(std::string_view text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t nl = text.find('\n', start);
    if (nl == std::string_view::npos) nl = text.size();
    out.emplace_back(text.substr(start, nl - start));
    start = nl + 1;
  }
  return out;
}

// The quoted strings (either quote) of a TOML array's text.
std::vector<std::string> quoted_strings(const std::string& text) {
  std::vector<std::string> out;
  for (size_t i = 0; i < text.size(); ++i) {
    char q = text[i];
    if (q != '"' && q != '\'') continue;
    size_t end = text.find(q, i + 1);
    if (end == std::string::npos) break;
    out.push_back(text.substr(i + 1, end - i - 1));
    i = end;
  }
  return out;
}

std::string join_path(const std::string& dir, const std::string& p) {
  if (!p.empty() && p.front() == '/') return p;
  return (std::filesystem::path(dir) / p).lexically_normal().string();
}

std::string rfc3339_or_empty(std::chrono::system_clock::time_point t) {
  return t.time_since_epoch().count() > 0 ? format_rfc3339(t) : std::string();
}

std::string human_age(std::chrono::seconds s) {
  auto m = std::chrono::duration_cast<std::chrono::minutes>(s).count();
  if (m >= 120) return fmt::format("{}h{}m", m / 60, m % 60);
  if (m >= 1) return fmt::format("{}m", m);
  return fmt::format("{}s", s.count());
}

}  // namespace

namespace {

// One line of a TOML file that matters here: a [table] header, or a `key = value` (keys and values
// in normalize_key's spelling; `full_key` with the current table in front).
struct TomlLine {
  bool header = false;
  std::string table;  // the header's table, or the table the key is in
  std::string key;
  std::string full_key;
  std::string value;
};

std::vector<TomlLine> toml_lines(std::string_view toml) {
  std::vector<TomlLine> out;
  std::string table;  // the current [table]
  for (const std::string& raw : split_lines_copy(toml)) {
    std::string_view line = trim(strip_comment(raw));
    if (line.empty()) continue;
    if (line.front() == '[') {
      std::string_view h = line;
      while (!h.empty() && h.front() == '[') h.remove_prefix(1);
      while (!h.empty() && h.back() == ']') h.remove_suffix(1);
      table = unquote_segments(normalize_key(h));
      out.push_back({true, table, "", "", ""});
      continue;
    }
    auto eq = line.find('=');
    if (eq == std::string_view::npos) continue;
    std::string key = unquote_segments(normalize_key(line.substr(0, eq)));
    std::string full = table.empty() ? key : table + "." + key;
    out.push_back(
        {false, table, std::move(key), std::move(full), normalize_key(line.substr(eq + 1))});
  }
  return out;
}

}  // namespace

std::string containerd_nvidia_runtime_form(std::string_view toml) {
  for (const TomlLine& l : toml_lines(toml)) {
    if (l.header) {
      if (is_or_below(l.table, kCriRuntimesV1) || is_or_below(l.table, kCriRuntimesV2))
        return "[" + l.table + "]";
      continue;
    }
    if (l.key == "default_runtime_name" && l.value == "\"nvidia\"")
      return "default_runtime_name = \"nvidia\"";
    if (is_or_below(l.full_key, kCriRuntimesV1) || is_or_below(l.full_key, kCriRuntimesV2))
      return l.full_key;
  }
  return "";
}

std::string containerd_cdi_form(std::string_view toml) {
  static constexpr std::string_view kPlugins[] = {"plugins.\"io.containerd.grpc.v1.cri\"",
                                                  "plugins.\"io.containerd.cri.v1.runtime\""};
  for (const TomlLine& l : toml_lines(toml)) {
    if (l.header || l.value != "true") continue;
    for (std::string_view plugin : kPlugins)
      if (l.full_key == std::string(plugin) + ".enable_cdi")
        return "[" + std::string(plugin) + "] enable_cdi = true";
  }
  return "";
}

namespace {

// The strings of the first array-valued key `matches` accepts (its value may span lines); nullopt
// when there is none. `top_level`: only keys before the first [table].
template <typename Match>
std::optional<std::vector<std::string>> toml_string_array(std::string_view toml, bool top_level,
                                                          Match matches) {
  std::string collected;
  bool in_array = false;
  for (const std::string& raw : split_lines_copy(toml)) {
    std::string_view line = trim(strip_comment(raw));
    if (!in_array) {
      if (!line.empty() && line.front() == '[') {
        if (top_level) break;
        continue;
      }
      auto eq = line.find('=');
      if (eq == std::string_view::npos || !matches(normalize_key(line.substr(0, eq)))) continue;
      in_array = true;
      line = trim(line.substr(eq + 1));
    }
    collected += std::string(line) + "\n";
    if (line.find(']') != std::string_view::npos) break;
  }
  if (!in_array) return std::nullopt;
  return quoted_strings(collected);
}

}  // namespace

std::vector<std::string> containerd_cdi_spec_dirs(std::string_view toml) {
  auto dirs = toml_string_array(toml, false, [](const std::string& key) {
    return key == "cdi_spec_dirs" || key.ends_with(".cdi_spec_dirs");
  });
  return dirs ? *dirs : std::vector<std::string>{"/etc/cdi", "/var/run/cdi"};
}

bool nvidia_cdi_spec(std::string_view spec) {
  for (std::string_view line : host::split_lines(spec)) {
    // YAML `kind: nvidia.com/gpu`, or JSON `"kind": "nvidia.com/gpu"` (one line or several).
    for (size_t k = line.find("kind"); k != std::string_view::npos; k = line.find("kind", k + 1)) {
      std::string rest = normalize_key(line.substr(k + 4));
      if (!rest.empty() && rest.front() == '"') rest.erase(0, 1);
      // Quoted, the closing quote ends the value; bare (YAML), the line does.
      if (rest.rfind(":\"nvidia.com/gpu\"", 0) == 0 || rest == ":nvidia.com/gpu") return true;
    }
  }
  return false;
}

std::vector<std::string> containerd_config_imports(std::string_view toml) {
  // imports is a top-level key.
  return toml_string_array(toml, true, [](const std::string& key) { return key == "imports"; })
      .value_or(std::vector<std::string>{});
}

bool containerd_cri_disabled(std::string_view toml) {
  auto disabled = toml_string_array(
      toml, true, [](const std::string& key) { return key == "disabled_plugins"; });
  if (!disabled) return false;
  return std::any_of(disabled->begin(), disabled->end(), [](const std::string& p) {
    return p == "cri" || p == "io.containerd.grpc.v1.cri";
  });
}

const ContainerdLayout& find_containerd_layout(const host::HostFs& fs) {
  std::error_code ec;
  auto socket = [&](const ContainerdLayout& l) {
    return std::filesystem::exists(fs.path(std::string(l.socket)), ec);
  };
  auto config = [&](const ContainerdLayout& l) {
    return std::filesystem::exists(fs.path(std::string(l.config)), ec);
  };
  for (const auto& l : kContainerdLayouts)
    if (socket(l) && config(l)) return l;
  for (const auto& l : kContainerdLayouts)
    if (socket(l)) return l;
  for (const auto& l : kContainerdLayouts)
    if (config(l)) return l;
  return kContainerdLayouts[0];
}

Result<ContainerdNvidiaRuntime> read_containerd_nvidia_runtime(const host::HostFs& fs,
                                                               const std::string& config_path) {
  ContainerdNvidiaRuntime out;
  auto main = fs.read(config_path, 4 << 20);
  if (!main)
    return make_error(fmt::format("cannot read {}: {}", config_path, main.error().message));
  out.cri_disabled = containerd_cri_disabled(*main);
  std::set<std::string> seen{config_path};
  std::vector<std::pair<std::string, std::string>> queue{{config_path, std::move(*main)}};
  for (size_t i = 0; i < queue.size() && i < 64; ++i) {
    const auto [path, text] = queue[i];
    out.read.push_back(path);
    if (!out.configured) {
      if (std::string form = containerd_nvidia_runtime_form(text); !form.empty()) {
        out.configured = true;
        out.found_in = fmt::format("{}: {}", path, form);
      }
    }
    const std::string dir = std::filesystem::path(path).parent_path().string();
    for (const std::string& imp : containerd_config_imports(text)) {
      const std::string pattern = join_path(dir, imp);
      glob_t g{};
      std::vector<std::string> matches;
      if (::glob(fs.path(pattern).c_str(), 0, nullptr, &g) == 0)
        for (size_t k = 0; k < g.gl_pathc; ++k) {
          std::string m = g.gl_pathv[k];
          // back to the host's terms
          std::string root = fs.path("/");
          if (root.size() > 1 && m.rfind(root, 0) == 0) m = "/" + m.substr(root.size());
          matches.push_back(std::filesystem::path(m).lexically_normal().string());
        }
      globfree(&g);
      for (const std::string& m : matches) {
        if (!seen.insert(m).second) continue;
        auto t = fs.read(m, 4 << 20);
        if (!t) {
          out.errors.push_back(fmt::format("cannot read {}: {}", m, t.error().message));
          continue;
        }
        queue.emplace_back(m, std::move(*t));
      }
    }
  }
  if (out.configured) return out;
  // Native CDI: enabled in one of the files, and an nvidia.com/gpu spec where containerd looks.
  for (const auto& [path, text] : queue) {
    std::string form = containerd_cdi_form(text);
    if (form.empty()) continue;
    out.cdi_enabled_in = fmt::format("{}: {}", path, form);
    std::vector<std::string> dirs = containerd_cdi_spec_dirs(text);
    for (const std::string& dir : dirs) {
      auto names = fs.list(dir);
      if (!names) continue;
      std::sort(names->begin(), names->end());
      for (const std::string& name : *names) {
        if (!name.ends_with(".yaml") && !name.ends_with(".yml") && !name.ends_with(".json"))
          continue;
        const std::string spec = dir + "/" + name;
        if (auto t = fs.read(spec, 4 << 20); t && nvidia_cdi_spec(*t)) {
          out.configured = true;
          out.found_in = fmt::format("{}: {}", path, form);
          out.cdi_spec = spec;
          return out;
        }
      }
    }
    out.errors.push_back(fmt::format("{} enables CDI, but no nvidia.com/gpu CDI spec is in {}",
                                     path, fmt::join(dirs, " or ")));
    return out;
  }
  return out;
}

const runtimes::CriSandbox* find_nvidia_toolkit_sandbox(const runtimes::CriPods& pods) {
  const runtimes::CriSandbox* best = nullptr;
  for (const auto& s : pods.sandboxes)
    if (s.ready() && s.name.find(kNvidiaToolkitPod) != std::string::npos &&
        (best == nullptr || s.created < best->created))
      best = &s;
  return best;
}

CheckResult evaluate_containerd(const ContainerdSnapshot& s) {
  nlohmann::json data = nlohmann::json::object();
  data["socket"] = s.socket;
  data["socket_exists"] = s.socket_exists;
  if (s.uptime) data["uptime_seconds"] = s.uptime->count();
  std::vector<std::string> errors;
  // Set below: the config cannot give containers GPUs although it is meant to.
  std::optional<std::string> config_fault;
  std::vector<std::string> config_errors;
  auto finish = [&](Health h, std::string reason) {
    if (config_fault && h == Health::kHealthy) {
      h = Health::kUnhealthy;
      reason = *config_fault + "; " + reason;
      errors.insert(errors.end(), config_errors.begin(), config_errors.end());
    }
    CheckResult r = single_state("containerd", h, reason, std::nullopt, data, s.now);
    if (!errors.empty()) r.states[0].error = fmt::format("{}", fmt::join(errors, "; "));
    r.detail = reason + "\n" + (errors.empty() ? "" : fmt::format("{}\n", fmt::join(errors, "\n")));
    return r;
  };
  if (!s.installed) return finish(Health::kHealthy, "containerd is not installed");
  data["distribution"] = s.distribution;
  if (!s.config_path.empty()) data["config"] = s.config_path;
  if (s.nvidia_gpus && s.nvidia_runtime && *s.nvidia_runtime && !s.crio_answers) {
    const ContainerdNvidiaRuntime& rt = **s.nvidia_runtime;
    if (rt.configured) {
      data["nvidia_runtime"] = rt.found_in;
      if (!rt.cdi_spec.empty()) data["nvidia_cdi_spec"] = rt.cdi_spec;
    } else if (!rt.cri_disabled) {
      config_errors = rt.errors;
      // CDI enabled: its spec-directory error is the last one read_containerd_nvidia_runtime
      // records.
      if (!rt.cdi_enabled_in.empty() && !rt.errors.empty())
        config_fault = rt.errors.back() + ", and no nvidia runtime is configured";
      else if (s.distribution != "containerd")
        config_fault = fmt::format(
            "{}'s containerd config {} configures no nvidia runtime ({} adds it when it finds the "
            "NVIDIA container toolkit)",
            s.distribution, s.config_path, s.distribution);
    }
  }

  // Socket, connection and service: Unhealthy, unless the containerd behind the socket has only
  // just started.
  std::optional<std::string> down;
  if (!s.socket_exists) {
    data["socket_missing_checks"] = s.socket_missing_checks;
    if (s.crio_answers)
      return finish(Health::kHealthy,
                    fmt::format("containerd socket {} not found; CRI-O is running", s.socket));
    if (s.socket_missing_checks < kContainerdSocketMissingChecks)
      return finish(Health::kHealthy,
                    fmt::format("containerd socket {} not found ({} of {} checks)", s.socket,
                                s.socket_missing_checks, kContainerdSocketMissingChecks));
    down = fmt::format("containerd socket {} not found in {} consecutive checks", s.socket,
                       s.socket_missing_checks);
  } else if (s.pods && !*s.pods && (s.pods->error().code == GPUD_CRI_UNAVAILABLE)) {
    down = "containerd installed but not running";
    errors.push_back(s.pods->error().message);
  }
  if (!down && s.service) {
    const auto& svc = *s.service;
    if (!svc) {
      errors.push_back("cannot read the containerd service: " + svc.error().message);
    } else if (!svc->error.empty()) {
      errors.push_back("cannot read the containerd service: " + svc->error);
    } else {
      data["service_active_state"] = svc->active_state;
      // A containerd systemd does not know (k3s, rke2 and others run their own) is not judged.
      if (svc->load_state != "not-found" && svc->active_state != "active")
        down = fmt::format("containerd service is {} ({})", svc->active_state, svc->sub_state);
    }
  }
  if (down) {
    if (s.uptime && *s.uptime < kContainerdStartGrace)
      return finish(Health::kHealthy, *down + "; containerd has not been running for long enough");
    return finish(Health::kUnhealthy, *down);
  }

  if (!s.pods) return finish(Health::kHealthy, "containerd is running");
  if (!*s.pods) {
    const Error& e = s.pods->error();
    errors.push_back(e.message);
    if (e.code == GPUD_CRI_UNIMPLEMENTED)
      return finish(Health::kHealthy, "containerd is running; CRI is not enabled");
    if (e.code == runtimes::kCriModuleMissing)
      return finish(Health::kDegraded, "cannot list containerd's pods: the cri module is missing");
    return finish(Health::kUnhealthy, "containerd CRI listing failed");
  }
  const runtimes::CriPods& pods = **s.pods;
  std::map<std::string, nlohmann::json> by_sandbox;
  for (const auto& c : pods.containers)
    by_sandbox[c.sandbox_id].push_back({{"id", c.id},
                                        {"name", c.name},
                                        {"state", c.state},
                                        {"created", rfc3339_or_empty(c.created)},
                                        {"image", c.image}});
  nlohmann::json list = nlohmann::json::array();
  for (const auto& p : pods.sandboxes) {
    auto it = by_sandbox.find(p.id);
    list.push_back({{"id", p.id},
                    {"name", p.name},
                    {"namespace", p.pod_namespace},
                    {"uid", p.uid},
                    {"state", p.state},
                    {"created", rfc3339_or_empty(p.created)},
                    {"containers", it != by_sandbox.end() ? it->second : nlohmann::json::array()}});
  }
  data["sandboxes"] = std::move(list);
  std::string reason = fmt::format("containerd is running ({} pod sandboxes, {} containers)",
                                   pods.sandboxes.size(), pods.containers.size());
  if (!s.nvidia_gpus) return finish(Health::kHealthy, reason);

  const runtimes::CriSandbox* toolkit = find_nvidia_toolkit_sandbox(pods);
  if (toolkit == nullptr)
    return finish(Health::kHealthy, reason + "; nvidia-container-toolkit pod not found");
  const auto age = std::chrono::duration_cast<std::chrono::seconds>(s.now - toolkit->created);
  data["nvidia_toolkit_pod"] = toolkit->pod_namespace + "/" + toolkit->name;
  if (age < s.toolkit_min_age || !s.nvidia_runtime) return finish(Health::kHealthy, reason);
  const auto& rt = *s.nvidia_runtime;
  if (rt && rt->configured) {
    data["nvidia_runtime"] = rt->found_in;
    if (!rt->cdi_spec.empty()) data["nvidia_cdi_spec"] = rt->cdi_spec;
    return finish(Health::kHealthy, reason);
  }
  if (!rt)
    errors.push_back(rt.error().message);
  else
    for (const auto& e : rt->errors) errors.push_back(e);
  data["nvidia_runtime"] = nullptr;
  return finish(Health::kUnhealthy,
                fmt::format("nvidia-container-toolkit pod {}/{} has been ready for {} but {} (and "
                            "its imports) configures no nvidia runtime",
                            toolkit->pod_namespace, toolkit->name, human_age(age), s.config_path));
}

ContainerdComponent::ContainerdComponent(const ComponentContext& ctx)
    : Component(ctx), fs_(ctx.config->host_root), listings_(ctx) {}

std::string ContainerdComponent::socket_path() const {
  return config().containerd_socket.empty()
             ? fs_.path(std::string(find_containerd_layout(fs_).socket))
             : config().containerd_socket;
}

std::string ContainerdComponent::crio_socket_path() const {
  return fs_.path("/run/crio/crio.sock");
}

bool ContainerdComponent::supported() const {
  return installed_.get([this] {
    // On the search path, or on the host (gpud in a container sees the host under --host-root),
    // or its socket exists.
    std::error_code ec;
    return host::find_executable(config().containerd_command, config().executable_search_path)
               .has_value() ||
           (fs_.root() != "/" &&
            (std::filesystem::exists(fs_.path("/usr/bin/containerd"), ec) ||
             std::filesystem::exists(fs_.path("/usr/local/bin/containerd"), ec))) ||
           std::filesystem::exists(socket_path(), ec) ||
           std::any_of(std::begin(kContainerdLayouts), std::end(kContainerdLayouts),
                       [&](const ContainerdLayout& l) {
                         return std::filesystem::exists(fs_.path(std::string(l.socket)), ec) ||
                                (l.distribution != "containerd" &&
                                 std::filesystem::exists(fs_.path(std::string(l.config)), ec));
                       });
  });
}

CheckResult ContainerdComponent::check() {
  const auto timeout = std::chrono::duration_cast<std::chrono::milliseconds>(kContainerdTimeout);
  ContainerdSnapshot s;
  s.installed = supported();
  s.socket = socket_path();
  s.toolkit_min_age = toolkit_min_age_;
  const ContainerdLayout& layout = find_containerd_layout(fs_);
  s.config_path = std::string(layout.config);
  s.distribution = std::string(layout.distribution);
  std::error_code ec;
  s.socket_exists = std::filesystem::exists(s.socket, ec);
  socket_missing_checks_ = s.socket_exists ? 0 : socket_missing_checks_ + 1;
  s.socket_missing_checks = socket_missing_checks_;
  if (s.installed && !s.socket_exists) {
    const std::string crio = crio_socket_path();
    s.crio_answers =
        std::filesystem::exists(crio, ec) && listings_.source().cri().version(crio, timeout).ok();
  }
  if (s.installed && s.socket_exists) {
    // The socket as containerd bound it: without the host root.
    std::string bound = s.socket;
    const std::string& root = fs_.root();
    if (root != "/" && !root.empty() && bound.rfind(root, 0) == 0)
      bound = bound.substr(root.size());
    if (auto pid = host::unix_socket_owner(fs_, bound, "containerd"); pid)
      if (auto started = host::process_start_time(fs_, *pid); started && *started <= s.now)
        s.uptime = std::chrono::duration_cast<std::chrono::seconds>(s.now - *started);
    s.service =
        host::host_unit_state(fs_, config().systemctl_command, config().executable_search_path,
                              "containerd.service", timeout);
    s.pods = listings_.source().containerd_pods(s.socket, timeout);
  }
  s.nvidia_gpus =
      ctx().nvidia_pci_present || (ctx().nvidia != nullptr && ctx().nvidia->gpu_count() > 0);
  // With NVIDIA GPUs the config is read where it exists (its NVIDIA setup is judged with or without
  // a running containerd), and where a toolkit pod old enough says it must name the nvidia runtime
  // (a missing config is containerd's defaults: none).
  if (s.installed && s.nvidia_gpus) {
    bool toolkit_old_enough = false;
    if (s.pods && *s.pods)
      if (const auto* t = find_nvidia_toolkit_sandbox(**s.pods);
          t != nullptr && s.now - t->created >= s.toolkit_min_age)
        toolkit_old_enough = true;
    if (toolkit_old_enough || std::filesystem::exists(fs_.path(s.config_path), ec))
      s.nvidia_runtime = read_containerd_nvidia_runtime(fs_, s.config_path);
  }

  // Not listed (not installed, or no socket): what containerd listed before runs no more.
  if (!s.pods) listings_.source().gone(runtimes::kContainerdSource);
  return evaluate_containerd(s);
}

}  // namespace gpud::components
