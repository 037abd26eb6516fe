// Writes lines into the kernel log (/dev/kmsg) for fault injection, and renders the kernel's own
// text for NVIDIA faults so the kernel-log rules see exactly what a real fault prints.
#pragma once

#include <string>
#include <string_view>

#include "core/result.h"

namespace gpud::kmsg {

inline constexpr size_t kMaxWriteBytes = 976;  // 1024 - 48, as GPUd
inline constexpr int kLogSyslog = 5;           // LOG_SYSLOG >> 3, GPUd's facility

struct WriteOptions {
  std::string path = "/dev/kmsg";
  int level = 6;  // KERN_EMERG 0 .. KERN_DEBUG 7
  int facility = kLogSyslog;
  std::string_view suffix;  // kept whole after the message, e.g. kInjectedMarker
};

// "<P>message<suffix>\n" with P = facility << 3 | level; tabs become spaces, newlines end the
// message, a longer message is cut, ending in "...", so that the whole line (suffix included) is
// at most kMaxWriteBytes.
std::string format_kmsg_write(std::string_view message, int level, int facility,
                              std::string_view suffix = {});
[[nodiscard]] Result<void> write_kmsg(std::string_view message, const WriteOptions& opts = {});

// "NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus."
// `pci` in any form ("0000:3b:00.0", "3b:00", "PCI:0000:3b:00"); `detail` defaults to the
// catalog description.
std::string xid_line(int code, std::string_view pci, std::string_view detail = {});
// "nvidia-nvswitch0: SXid (PCI:0000:05:00.0): 20034, Fatal, Link 30 LTSSM Fault Up"
std::string sxid_line(int code, std::string_view pci, int nvswitch = 0, int link = 0,
                      std::string_view detail = {});

}  // namespace gpud::kmsg
