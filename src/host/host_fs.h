// HostFs: reads the host's /proc, /sys and /etc through a root prefix (--host-root), so tests use
// fixture trees and a containerised gpud can read /host/proc.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "core/strings.h"

namespace gpud::host {

class HostFs {
 public:
  explicit HostFs(std::string root = "/");
  // "/proc/stat" -> "<root>/proc/stat"
  std::string path(std::string_view absolute) const;
  const std::string& root() const { return root_; }
  // Reads a whole file (bounded by max_bytes; /proc files report size 0 so this reads until EOF).
  Result<std::string> read(std::string_view absolute, size_t max_bytes = 16 << 20) const;
  // The first line, trimmed; for one-value files like /proc/sys/fs/file-max.
  Result<std::string> read_line(std::string_view absolute) const;
  Result<int64_t> read_int(std::string_view absolute) const;
  // Passes each line (without its newline) to on_line, reading in fixed chunks so memory stays
  // bounded however long the file is (/proc/vmallocinfo holds a line per mapping: megabytes on a
  // busy host). A line longer than max_line is passed cut there. Fails when the file cannot be
  // read or holds more than max_bytes: a caller adding up lines must not report a partial sum.
  [[nodiscard]] Result<void> for_each_line(std::string_view absolute,
                                           const std::function<void(std::string_view)>& on_line,
                                           size_t max_bytes = 256 << 20,
                                           size_t max_line = 4 << 10) const;
  bool exists(std::string_view absolute) const;
  // Entry names of a directory (no "." / ".."), unsorted.
  Result<std::vector<std::string>> list(std::string_view absolute) const;

 private:
  std::string root_;
};

std::vector<std::string_view> split_fields(std::string_view line);  // on runs of spaces/tabs
std::vector<std::string_view> split_lines(std::string_view text);

}  // namespace gpud::host
