// Parsers for /proc/sys/fs/file-nr and /proc/sys/fs/file-max: system-wide file handle usage.
#pragma once

#include <cstdint>
#include <string_view>

#include "core/result.h"

namespace gpud::host {

struct FileNr {
  uint64_t allocated = 0;  // file handles allocated
  uint64_t unused = 0;     // allocated but unused (always 0 since Linux 2.6)
  uint64_t max = 0;        // same as file-max
};

// "1234\t0\t9223372036854775807"
[[nodiscard]] Result<FileNr> parse_file_nr(std::string_view text);
// One number; file-max can be LONG_MAX on recent kernels.
[[nodiscard]] Result<uint64_t> parse_file_max(std::string_view text);

}  // namespace gpud::host
