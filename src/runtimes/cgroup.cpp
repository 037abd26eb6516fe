#include "runtimes/cgroup.h"

#include <algorithm>
#include <cctype>

namespace gpud::runtimes {
namespace {

bool is_hex_id(std::string_view s) {
  return s.size() == 64 && std::all_of(s.begin(), s.end(), [](char c) {
           return std::isdigit(static_cast<unsigned char>(c)) != 0 || (c >= 'a' && c <= 'f');
         });
}

// "0d8a4c1e-...": 8-4-4-4-12 hex digits (Kubernetes pod uids are RFC 4122 UUIDs).
bool is_uuid(std::string_view s) {
  if (s.size() != 36) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    const bool dash = i == 8 || i == 13 || i == 18 || i == 23;
    if (dash ? s[i] != '-' : std::isxdigit(static_cast<unsigned char>(s[i])) == 0) return false;
  }
  return true;
}

// The container id a path component names, and the runtime its prefix names.
std::optional<std::pair<std::string, std::string>> container_of(std::string_view part) {
  if (is_hex_id(part)) return std::pair{std::string(part), std::string()};
  constexpr std::string_view kScope = ".scope";
  if (part.size() <= kScope.size() || part.substr(part.size() - kScope.size()) != kScope)
    return std::nullopt;
  std::string_view unit = part.substr(0, part.size() - kScope.size());
  // systemd driver: "<runtime>-<id>.scope"; CRI-O's "crio-conmon-<id>.scope" is its monitor, not
  // the container.
  static constexpr std::pair<std::string_view, std::string_view> kPrefixes[] = {
      {"cri-containerd-", "containerd"}, {"docker-", "docker"}, {"crio-", "crio"}};
  for (const auto& [prefix, runtime] : kPrefixes) {
    if (unit.substr(0, prefix.size()) != prefix) continue;
    std::string_view id = unit.substr(prefix.size());
    if (is_hex_id(id)) return std::pair{std::string(id), std::string(runtime)};
  }
  return std::nullopt;
}

// "pod<uid>" (cgroupfs) or "kubepods-<qos>-pod<uid_with_underscores>.slice" (systemd).
std::optional<std::string> pod_of(std::string_view part) {
  constexpr std::string_view kSlice = ".slice";
  if (part.size() > kSlice.size() && part.substr(part.size() - kSlice.size()) == kSlice) {
    std::string_view unit = part.substr(0, part.size() - kSlice.size());
    auto at = unit.rfind("-pod");
    if (at == std::string_view::npos || unit.substr(0, 8) != "kubepods") return std::nullopt;
    std::string uid(unit.substr(at + 4));
    std::replace(uid.begin(), uid.end(), '_', '-');
    if (is_uuid(uid)) return uid;
    return std::nullopt;
  }
  if (part.substr(0, 3) == "pod" && is_uuid(part.substr(3))) return std::string(part.substr(3));
  return std::nullopt;
}

}  // namespace

std::optional<CgroupIdentity> parse_cgroup_path(std::string_view path) {
  CgroupIdentity out;
  std::string_view prev;
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string_view::npos) end = path.size();
    std::string_view part = path.substr(start, end - start);
    if (!part.empty()) {
      // Innermost wins: a container nested in another (docker in a pod) is the one running it.
      if (auto c = container_of(part)) {
        out.container_id = std::move(c->first);
        // cgroupfs driver: docker's "/docker/<id>"; under a pod the id alone says no runtime.
        out.runtime = c->second.empty() && prev == "docker" ? "docker" : std::move(c->second);
      } else if (auto uid = pod_of(part)) {
        out.pod_uid = std::move(*uid);
      }
      prev = part;
    }
    start = end + 1;
  }
  if (out.container_id.empty() && out.pod_uid.empty()) return std::nullopt;
  return out;
}

std::optional<CgroupIdentity> parse_proc_cgroup(std::string_view text) {
  std::optional<CgroupIdentity> pod_only;
  for (std::string_view line : host::split_lines(text)) {
    // "hierarchy-ID:controller-list:cgroup-path"; the path may itself hold ':'.
    const size_t a = line.find(':');
    if (a == std::string_view::npos) continue;
    const size_t b = line.find(':', a + 1);
    if (b == std::string_view::npos) continue;
    std::string_view hierarchy = line.substr(0, a);
    if (hierarchy.empty() || !std::all_of(hierarchy.begin(), hierarchy.end(), [](char c) {
          return std::isdigit(static_cast<unsigned char>(c)) != 0;
        }))
      continue;
    std::string_view path = line.substr(b + 1);
    if (path.empty() || path.front() != '/') continue;
    auto id = parse_cgroup_path(path);
    if (!id) continue;
    if (!id->container_id.empty()) return id;
    if (!pod_only) pod_only = std::move(id);
  }
  return pod_only;
}

Result<std::optional<CgroupIdentity>> read_process_cgroup(const host::HostFs& fs, uint32_t pid) {
  auto text = fs.read("/proc/" + std::to_string(pid) + "/cgroup", 256 << 10);
  if (!text) return text.error();
  return parse_proc_cgroup(*text);
}

}  // namespace gpud::runtimes
