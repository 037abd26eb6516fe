#include "host/nfs_probe.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <nlohmann/json.hpp>

namespace gpud::host {
namespace {

std::string sys_error(std::string_view step, const std::string& path) {
  return std::string(step) + " " + path + ": " + std::strerror(errno);
}

bool write_all(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

// At most `max` bytes of a file; nullopt (errno set) when it cannot be read.
std::optional<std::string> read_small(const std::string& path, size_t max) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return std::nullopt;
  std::string out;
  char buf[4096];
  while (out.size() <= max) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      ::close(fd);
      errno = err;
      return std::nullopt;
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

// The probe's steps, on the worker thread. Returns the error, "" when every step passed.
std::string probe_steps(const std::string& volume, const Config::NfsChecker& c,
                        const std::string& machine_id, NfsProbe& out) {
  struct stat st {};
  if (::stat(volume.c_str(), &st) != 0) return sys_error("stat", volume);
  if (!S_ISDIR(st.st_mode)) return volume + " is not a directory";
  const std::string dir = volume + "/" + c.dir_name;
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) return sys_error("mkdir", dir);
  // Written under a temporary name and renamed, so a member never reads half a file.
  const std::string mine = dir + "/" + machine_id;
  const std::string tmp = mine + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0) return sys_error("write", tmp);
  if (!write_all(fd, c.file_contents) || ::fsync(fd) != 0) {
    std::string e = sys_error("write", tmp);
    ::close(fd);
    ::unlink(tmp.c_str());
    return e;
  }
  if (::close(fd) != 0) return sys_error("write", tmp);
  if (::rename(tmp.c_str(), mine.c_str()) != 0) return sys_error("rename", tmp);
  auto back = read_small(mine, c.file_contents.size() + 1);
  if (!back) return sys_error("read", mine);
  if (*back != c.file_contents) return "read " + mine + ": other contents than were written";
  out.members.push_back(machine_id);

  std::string error;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) {
    error = sys_error("list", dir);
  } else {
    std::vector<std::string> others;
    while (dirent* e = ::readdir(d)) {
      std::string name = e->d_name;
      if (name == "." || name == ".." || name == machine_id || name.ends_with(".tmp")) continue;
      others.push_back(std::move(name));
    }
    ::closedir(d);
    std::sort(others.begin(), others.end());
    for (const auto& other : others) {
      const std::string path = dir + "/" + other;
      auto theirs = read_small(path, c.file_contents.size() + 1);
      if (!theirs) {
        if (errno == ENOENT) continue;  // that member just removed it
        error = sys_error("read", path);
        break;
      }
      if (*theirs != c.file_contents) {
        error =
            "member " + other + "'s file " + path + " has other contents than " + "file_contents";
        break;
      }
      out.members.push_back(other);
    }
  }
  if (::unlink(mine.c_str()) != 0 && error.empty()) error = sys_error("remove", mine);
  return error;
}

}  // namespace

Result<std::vector<Config::NfsChecker>> parse_nfs_checker_configs(std::string_view json) {
  auto j = nlohmann::json::parse(json, nullptr, false);
  if (!j.is_array())
    return make_error(
        "want a JSON array like [{\"volume_path\":\"/mnt/nfs\",\"dir_name\":\".gpud-nfs\","
        "\"file_contents\":\"ok\"}]");
  std::vector<Config::NfsChecker> out;
  for (size_t i = 0; i < j.size(); ++i) {
    const auto& e = j[i];
    const std::string at = "entry " + std::to_string(i);
    if (!e.is_object()) return make_error(at + " is not an object");
    for (const auto& [key, _] : e.items())
      if (key != "volume_path" && key != "dir_name" && key != "file_contents")
        return make_error(at + ": unknown field \"" + key + "\"");
    auto field = [&](const char* key) -> Result<std::string> {
      auto it = e.find(key);
      if (it == e.end() || !it->is_string() || it->get_ref<const std::string&>().empty())
        return make_error(at + ": \"" + key + "\" must be a non-empty string");
      return it->get<std::string>();
    };
    Config::NfsChecker c;
    for (auto [key, dest] : {std::pair{"volume_path", &c.volume_path},
                             {"dir_name", &c.dir_name},
                             {"file_contents", &c.file_contents}}) {
      auto v = field(key);
      if (!v) return v.error();
      *dest = std::move(*v);
    }
    if (c.volume_path.front() != '/')
      return make_error(at + ": \"volume_path\" must be an absolute path");
    if (c.dir_name.find('/') != std::string::npos || c.dir_name == "." || c.dir_name == "..")
      return make_error(at + ": \"dir_name\" must be one directory name");
    if (c.file_contents.size() > 4096)
      return make_error(at + ": \"file_contents\" is longer than 4096 bytes");
    out.push_back(std::move(c));
  }
  return out;
}

const MountInfo* containing_mount(const MountTable& table, std::string_view path) {
  const MountInfo* best = nullptr;
  for (const MountInfo& m : table.mounts) {
    std::string_view mp = m.mount_point;
    bool holds = mp == "/" || path == mp ||
                 (path.starts_with(mp) && path.size() > mp.size() && path[mp.size()] == '/');
    if (holds && (best == nullptr || mp.size() >= best->mount_point.size())) best = &m;
  }
  return best;
}

bool network_fs_type(std::string_view fs_type) {
  return fs_type.starts_with("nfs") || fs_type == "lustre" || fs_type == "wekafs" ||
         fs_type == "virtiofs";
}

Result<NfsProbe> run_nfs_probe(const HostFs& fs, const Config::NfsChecker& checker,
                               const std::string& machine_id, std::chrono::milliseconds deadline) {
  if (machine_id.empty() || machine_id.find('/') != std::string::npos || machine_id[0] == '.')
    return make_error("no usable machine id (/etc/machine-id) to name this member's file");
  struct Answer {
    std::string error;
    NfsProbe probe;
  };
  auto answer = std::make_shared<Answer>();
  const std::string volume = fs.path(checker.volume_path);
  auto r = run_with_mount_deadline(
      "nfs-probe " + volume, checker.volume_path, deadline, [answer, volume, checker, machine_id] {
        answer->error = probe_steps(volume, checker, machine_id, answer->probe);
      });
  if (!r) return r.error();
  if (!answer->error.empty()) return make_error(answer->error);
  return answer->probe;
}

}  // namespace gpud::host
