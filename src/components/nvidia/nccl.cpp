#include "components/nvidia/nccl.h"

#include <string>

namespace gpud::components {

kmsg::ComponentRules nccl_kernel_log_rules() {
  // The kernel's report of a user process's fatal page fault on x86 (arch/x86/mm/fault.c,
  // show_signal_msg): "%s%s[%d]: segfault at %lx ip %px sp %px error %lx" (the log level, the
  // task's comm, its pid; ip and sp were %p before Linux 4.15, "(null)" for a null pointer), then
  // print_vma_addr's " in %s[%lx+%lx]" (the mapped file's base name, its start and size) when the
  // instruction is in a file, and since Linux 6.1 " likely on CPU %d (core %d, socket %d)". The
  // message begins with the comm (at most 15 bytes, which a process chooses; /dev/kmsg writes a
  // byte that is not printable, and a backslash, as \xNN) and ends with the mapping, so a message
  // that only quotes such a line (a path in "process '<path>' started with executable stack") is
  // not one.
  const std::string segfault = std::string(kmsg::kMessageStart) +
                               R"((?:[^\\\n]|\\x[0-9a-f]{2}){1,15}\[\d+\]: segfault at [0-9a-f]+ )"
                               R"(ip (?:[0-9a-f]+|\(null\)) )"
                               R"(sp (?:[0-9a-f]+|\(null\)) error [0-9a-f]+ )"
                               R"(in (libnccl\.so[^\s\[]*\[[0-9a-f]+\+[0-9a-f]+\]))"
                               R"((?: likely on CPU \d+ \(core \d+, socket \d+\))?\s*$)";
  kmsg::ComponentRules r;
  r.component = "accelerator-nvidia-nccl";
  r.lines = {kmsg::pattern_rule({{"in libnccl", "libncc"}}, "nvidia_nccl_segfault_in_libnccl",
                                segfault, "NCCL communication error (segfault in libnccl.so)",
                                "library")};
  return r;
}

}  // namespace gpud::components
