// Whole-file reads, for the few files gpud reads whole (its configuration, PEM files, its own
// binary for `gpud up`). Host state goes through host::HostFs, which reads under --host-root.
#pragma once

#include <cstddef>
#include <string>

#include "core/result.h"

namespace gpud {

// The file's bytes, or "cannot read PATH: <reason>".
[[nodiscard]] Result<std::string> read_file(const std::string& path);
// The same for a file that must be small: one larger than max_bytes (or without end, such as
// /dev/zero) is "PATH is larger than N bytes" after reading max_bytes + 1 of it.
[[nodiscard]] Result<std::string> read_file(const std::string& path, size_t max_bytes);

}  // namespace gpud
