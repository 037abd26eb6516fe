#include "host/fuse.h"

#include <algorithm>

#include "core/parse_number.h"
#include "host/mountinfo.h"

namespace gpud::host {

namespace {

// A connection's one-number file; the error names the file and what was wrong with it.
Result<uint64_t> read_counter(const HostFs& fs, const std::string& dir, const char* file) {
  auto line = fs.read_line(dir + "/" + file);
  if (!line) return make_error(std::string(file) + " unreadable");
  auto v = parse_integer<uint64_t>(*line);
  if (!v) return make_error(std::string(file) + " not a number: \"" + line->substr(0, 40) + "\"");
  return *v;
}

bool numeric_less(const std::string& a, const std::string& b) {
  auto x = parse_integer<uint64_t>(a), y = parse_integer<uint64_t>(b);
  if (x && y) return *x < *y;
  if (x.has_value() != y.has_value()) return x.has_value();
  return a < b;
}

}  // namespace

Result<FuseConnections> read_fuse_connections(const HostFs& fs, const std::string& mountinfo) {
  FuseConnections out;
  if (!fs.exists(kFuseConnectionsDir)) return out;
  out.control_fs_present = true;
  auto names = fs.list(kFuseConnectionsDir);
  if (!names) return names.error();
  std::sort(names->begin(), names->end(), numeric_less);
  MountTable table = parse_mountinfo(mountinfo);
  for (const std::string& id : *names) {
    FuseConnection c;
    c.id = id;
    const std::string dir = std::string(kFuseConnectionsDir) + "/" + id;
    std::vector<std::string> errors;
    for (auto [file, field] : {std::pair{"waiting", &c.waiting},
                               std::pair{"congestion_threshold", &c.congestion_threshold},
                               std::pair{"max_background", &c.max_background}}) {
      auto v = read_counter(fs, dir, file);
      if (v)
        *field = *v;
      else
        errors.push_back(v.error().message);
    }
    for (size_t i = 0; i < errors.size(); ++i) c.error += (i == 0 ? "" : ", ") + errors[i];
    // The directory is named after the kernel's dev_t of the super block, (major << 20) | minor:
    // the minor alone for FUSE's anonymous devices (major 0).
    auto dev = parse_integer<uint64_t>(id);
    for (const MountInfo& m : table.mounts) {
      if (!dev || ((uint64_t{m.major} << 20) | m.minor) != *dev) continue;
      if (m.fs_type != "fuse" && m.fs_type != "fuseblk" && m.fs_type.rfind("fuse.", 0) != 0)
        continue;
      c.mount_point = m.mount_point;
      c.source = m.source;
      c.fs_type = m.fs_type;
    }
    out.connections.push_back(std::move(c));
  }
  return out;
}

}  // namespace gpud::host
