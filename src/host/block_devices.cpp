#include "host/block_devices.h"

#include <unistd.h>

#include <algorithm>
#include <map>

#include "host/fs_usage.h"

namespace gpud::host {
namespace {

std::string unescape_octal(std::string_view s) {
  auto is_oct = [](char c) { return c >= '0' && c <= '7'; };
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 3 < s.size() && is_oct(s[i + 1]) && is_oct(s[i + 2]) &&
        is_oct(s[i + 3])) {
      out += static_cast<char>((s[i + 1] - '0') * 64 + (s[i + 2] - '0') * 8 + (s[i + 3] - '0'));
      i += 3;
      continue;
    }
    out += s[i];
  }
  return out;
}

std::string read_attr(const HostFs& fs, const std::string& path) {
  auto r = fs.read_line(path);
  return r ? std::move(r).value() : std::string();
}

int64_t read_sectors_bytes(const HostFs& fs, const std::string& dir) {
  auto r = fs.read_int(dir + "/size");
  return r && *r > 0 ? *r * 512 : 0;
}

bool is_virtual_kind(std::string_view name) {
  return name.starts_with("loop") || name.starts_with("ram") || name.starts_with("zram");
}

std::string disk_type(const HostFs& fs, const std::string& name) {
  if (name.starts_with("loop")) return "loop";
  if (name.starts_with("dm-")) {
    std::string uuid = read_attr(fs, "/sys/block/" + name + "/dm/uuid");
    if (uuid.starts_with("LVM-")) return "lvm";
    if (uuid.starts_with("CRYPT-")) return "crypt";
    return "dm";
  }
  if (name.starts_with("md")) {
    std::string level = read_attr(fs, "/sys/block/" + name + "/md/level");
    return level.empty() ? "md" : level;
  }
  return "disk";
}

int64_t used_bytes_of(const HostFs& fs, const std::string& mount_point) {
  if (mount_point.empty()) return 0;
  auto usage = stat_fs_usage(fs, mount_point);  // a hung mount costs the deadline, once
  return usage ? static_cast<int64_t>(usage->used_bytes) : 0;
}

// PARTUUID is not in sysfs; udev publishes it as /dev/disk/by-partuuid/<uuid> -> ../../<part>.
std::map<std::string, std::string> read_part_uuids(const HostFs& fs) {
  std::map<std::string, std::string> by_name;
  auto entries = fs.list("/dev/disk/by-partuuid");
  if (!entries) return by_name;
  for (const std::string& uuid : *entries) {
    std::string link = fs.path("/dev/disk/by-partuuid/" + uuid);
    char buf[512];
    ssize_t n = ::readlink(link.c_str(), buf, sizeof buf - 1);
    if (n <= 0) continue;
    std::string_view target(buf, static_cast<size_t>(n));
    auto slash = target.rfind('/');
    by_name[std::string(slash == std::string_view::npos ? target : target.substr(slash + 1))] =
        uuid;
  }
  return by_name;
}

}  // namespace

std::vector<BlockMount> parse_block_mounts(std::string_view mountinfo) {
  // "36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue"
  std::vector<BlockMount> out;
  for (std::string_view line : split_lines(mountinfo)) {
    auto f = split_fields(line);
    if (f.size() < 7) continue;
    size_t sep = 6;
    while (sep < f.size() && f[sep] != "-") ++sep;
    if (sep + 1 >= f.size()) continue;
    out.push_back({std::string(f[2]), unescape_octal(f[4]), std::string(f[sep + 1])});
  }
  return out;
}

std::vector<BlockDevice> read_block_devices(const HostFs& fs) {
  std::vector<BlockDevice> out;
  auto names = fs.list("/sys/block");
  if (!names) return out;
  std::sort(names->begin(), names->end());

  std::vector<BlockMount> mounts;
  if (auto mi = fs.read("/proc/self/mountinfo"); mi) mounts = parse_block_mounts(*mi);
  auto mount_of = [&](BlockDevice& d) {
    if (d.major_minor.empty()) return;
    for (const BlockMount& m : mounts) {
      if (m.major_minor != d.major_minor) continue;
      d.mount_point = m.mount_point;
      d.fs_type = m.fs_type;
      break;  // the first mount, as lsblk shows
    }
    d.used_bytes = used_bytes_of(fs, d.mount_point);
  };
  auto part_uuids = read_part_uuids(fs);

  for (const std::string& name : *names) {
    const std::string dir = "/sys/block/" + name;
    BlockDevice disk;
    disk.name = name;
    disk.size_bytes = read_sectors_bytes(fs, dir);
    if (disk.size_bytes == 0 && is_virtual_kind(name)) continue;
    disk.type = disk_type(fs, name);
    disk.major_minor = read_attr(fs, dir + "/dev");
    disk.rotational = read_attr(fs, dir + "/queue/rotational") == "1";
    disk.model = read_attr(fs, dir + "/device/model");
    disk.vendor = read_attr(fs, dir + "/device/vendor");
    disk.serial = read_attr(fs, dir + "/device/serial");
    disk.rev = read_attr(fs, dir + "/device/rev");
    if (disk.rev.empty()) disk.rev = read_attr(fs, dir + "/device/firmware_rev");  // NVMe
    disk.wwn = read_attr(fs, dir + "/device/wwid");
    mount_of(disk);

    std::vector<BlockDevice> parts;
    if (auto entries = fs.list(dir); entries) {
      std::sort(entries->begin(), entries->end());
      for (const std::string& sub : *entries) {
        const std::string pdir = dir + "/" + sub;
        if (!fs.exists(pdir + "/partition")) continue;
        BlockDevice p;
        p.name = sub;
        p.type = "part";
        p.size_bytes = read_sectors_bytes(fs, pdir);
        p.major_minor = read_attr(fs, pdir + "/dev");
        p.rotational = disk.rotational;
        if (auto it = part_uuids.find(sub); it != part_uuids.end()) p.part_uuid = it->second;
        p.parents = {name};
        mount_of(p);
        disk.children.push_back(sub);
        parts.push_back(std::move(p));
      }
    }
    out.push_back(std::move(disk));
    for (auto& p : parts) out.push_back(std::move(p));
  }
  return out;
}

std::string find_disk_for_path(const std::vector<BlockDevice>& devices,
                               const std::vector<BlockMount>& mounts, std::string_view path) {
  auto covers = [&](std::string_view mp) {
    if (mp == "/") return true;
    return path.starts_with(mp) && (path.size() == mp.size() || path[mp.size()] == '/');
  };
  std::string best_name;
  size_t best_len = 0;
  for (const BlockMount& m : mounts) {
    if (!covers(m.mount_point)) continue;
    if (!best_name.empty() && m.mount_point.size() <= best_len) continue;
    for (const BlockDevice& d : devices) {
      if (d.major_minor == m.major_minor) {
        best_name = d.name;
        best_len = m.mount_point.size();
        break;
      }
    }
  }
  return best_name;
}

}  // namespace gpud::host
