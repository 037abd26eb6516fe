#include "host/unix_socket_owner.h"

#include <algorithm>
#include <filesystem>
#include <system_error>

#include "core/parse_number.h"

namespace gpud::host {

std::vector<uint64_t> unix_socket_inodes(std::string_view proc_net_unix, std::string_view path) {
  std::vector<uint64_t> out;
  for (std::string_view line : split_lines(proc_net_unix)) {
    auto f = split_fields(line);
    // Num RefCount Protocol Flags Type St Inode Path (a path with spaces is split: rejoin it)
    if (f.size() < 8 || f[0] == "Num") continue;
    std::string_view rest = line.substr(static_cast<size_t>(f[7].data() - line.data()));
    while (!rest.empty() && (rest.back() == ' ' || rest.back() == '\r')) rest.remove_suffix(1);
    if (rest != path) continue;
    if (auto inode = parse_integer<uint64_t>(f[6]); inode) out.push_back(*inode);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::optional<int64_t> unix_socket_owner(const HostFs& fs, std::string_view path,
                                         std::string_view comm) {
  auto table = fs.read("/proc/net/unix");
  if (!table) return std::nullopt;
  std::vector<uint64_t> inodes = unix_socket_inodes(*table, path);
  if (inodes.empty()) return std::nullopt;
  std::vector<std::string> links;
  for (uint64_t i : inodes) links.push_back("socket:[" + std::to_string(i) + "]");
  auto entries = fs.list("/proc");
  if (!entries) return std::nullopt;
  std::vector<int64_t> pids;
  for (const std::string& e : *entries)
    if (auto pid = parse_integer<int64_t>(e); pid && *pid > 0) pids.push_back(*pid);
  std::sort(pids.begin(), pids.end());
  for (int64_t pid : pids) {
    const std::string dir = "/proc/" + std::to_string(pid);
    auto name = fs.read_line(dir + "/comm");
    if (!name || *name != comm) continue;
    std::error_code ec;
    for (auto it = std::filesystem::directory_iterator(fs.path(dir + "/fd"), ec);
         !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
      std::error_code lec;
      std::string target = std::filesystem::read_symlink(it->path(), lec).string();
      if (!lec && std::find(links.begin(), links.end(), target) != links.end()) return pid;
    }
  }
  return std::nullopt;
}

}  // namespace gpud::host
