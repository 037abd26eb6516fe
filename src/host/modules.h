// Modules: the names of the kernel modules loaded now (/proc/modules).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "host/host_fs.h"

namespace gpud::host {

// The first field of every line, in file order.
std::vector<std::string> parse_proc_modules(std::string_view text);
[[nodiscard]] Result<std::vector<std::string>> read_loaded_modules(const HostFs& fs);
// Module names compare with '-' and '_' equal, as modprobe treats them ("nvidia-uvm" ==
// "nvidia_uvm").
std::string normalize_module_name(std::string_view name);

}  // namespace gpud::host
