// Modules: the names of the kernel modules loaded now (/proc/modules).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "host/host_fs.h"

namespace gpud::host {

// The first field of every line, in file order.
std::vector<std::string> parse_proc_modules(std::string_view text);

// One line of /proc/modules: "ib_core 434176 8 nvidia_peermem,rdma_cm,ib_uverbs, Live 0x0 (O)".
struct LoadedModule {
  std::string name;
  int64_t use_count = 0;             // the third field; -1 when the kernel printed "-" (unloading)
  std::vector<std::string> used_by;  // the fourth field's names ("-": none)
};
// Every line with at least four fields, in file order; shorter lines are left out.
std::vector<LoadedModule> parse_proc_modules_table(std::string_view text);
[[nodiscard]] Result<std::vector<LoadedModule>> read_loaded_modules_table(const HostFs& fs);
[[nodiscard]] Result<std::vector<std::string>> read_loaded_modules(const HostFs& fs);
// Module names compare with '-' and '_' equal, as modprobe treats them ("nvidia-uvm" ==
// "nvidia_uvm").
std::string normalize_module_name(std::string_view name);

}  // namespace gpud::host
