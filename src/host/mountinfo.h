// Parser for /proc/<pid>/mountinfo: the mount table the disk component uses to find tracked mounts.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace gpud::host {

struct MountInfo {
  int mount_id = 0;
  int parent_id = 0;
  unsigned major = 0;
  unsigned minor = 0;
  std::string root;                          // unescaped
  std::string mount_point;                   // unescaped
  std::string options;                       // per-mount options, e.g. "rw,relatime"
  std::vector<std::string> optional_fields;  // "shared:1", "master:2", ...
  std::string fs_type;
  std::string source;  // unescaped; "none" and friends as the kernel prints them
  std::string super_options;
};

struct MountTable {
  std::vector<MountInfo> mounts;  // in file order (parents before children)
  size_t malformed_lines = 0;     // skipped lines that did not have the mountinfo shape
};

// Never fails: lines without the shape "id parent maj:min root mp opts [opt...] - type source
// [superopts]" are skipped and counted. Linear in the input size.
MountTable parse_mountinfo(std::string_view text);

// Decodes the kernel's octal escapes (\040 space, \011 tab, \012 newline, \134 backslash, any
// \ooo).
std::string unescape_mount_field(std::string_view s);

// The mount visible at exactly this mount point: the last one in the table, since a later mount on
// the same point hides earlier ones. nullptr when nothing is mounted there.
const MountInfo* find_mount(const MountTable& table, std::string_view mount_point);

}  // namespace gpud::host
