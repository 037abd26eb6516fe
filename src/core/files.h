// Whole-file reads, for the few files gpud reads whole (its configuration, PEM files, its own
// binary for `gpud up`). Host state goes through host::HostFs, which reads under --host-root.
#pragma once

#include <string>

#include "core/result.h"

namespace gpud {

// The file's bytes, or "cannot read PATH: <reason>".
[[nodiscard]] Result<std::string> read_file(const std::string& path);

}  // namespace gpud
