#include "kmsg/writer.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "catalog/sxid_catalog.h"
#include "catalog/xid_catalog.h"
#include "core/pci_address.h"

namespace gpud::kmsg {

std::string format_kmsg_write(std::string_view message, int level, int facility,
                              std::string_view suffix) {
  std::string msg(message.substr(0, message.find('\n')));
  for (char& c : msg)
    if (c == '\t' || c == '\r') c = ' ';
  const size_t room = kMaxWriteBytes - std::min(suffix.size(), kMaxWriteBytes - 3);
  if (msg.size() > room) {
    msg.resize(room - 3);
    msg += "...";
  }
  const int prio = ((facility & 0xFF) << 3) | (level & 7);
  return "<" + std::to_string(prio) + ">" + msg + std::string(suffix) + "\n";
}

Result<void> write_kmsg(std::string_view message, const WriteOptions& opts) {
  const int fd = ::open(opts.path.c_str(), O_WRONLY | O_APPEND | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    return make_error(
        "cannot open " + opts.path + " for writing: " + std::strerror(errno) +
        (errno == EACCES || errno == EPERM ? " (writing the kernel log needs root)" : ""));
  }
  const std::string line = format_kmsg_write(message, opts.level, opts.facility, opts.suffix);
  const ssize_t n = ::write(fd, line.data(), line.size());
  const int err = errno;
  ::close(fd);
  if (n < 0) return make_error("write " + opts.path + ": " + std::strerror(err));
  if (static_cast<size_t>(n) != line.size()) return make_error("short write to " + opts.path);
  return {};
}

std::string xid_line(int code, std::string_view pci, std::string_view detail) {
  // The kernel prints the bus id without the function: "PCI:0000:3b:00".
  std::string bdf = normalize_pci_bus_id(pci);
  if (bdf.size() > 2 && bdf[bdf.size() - 2] == '.') bdf.resize(bdf.size() - 2);
  const std::string d =
      detail.empty() ? catalog::lookup_xid(code).description + "." : std::string(detail);
  return "NVRM: Xid (PCI:" + bdf + "): " + std::to_string(code) +
         ", pid='<unknown>', name=<unknown>, " + d;
}

std::string sxid_line(int code, std::string_view pci, int nvswitch, int link,
                      std::string_view detail) {
  const auto info = catalog::lookup_sxid(code);
  const std::string sev = info.type == EventType::kFatal ? "Fatal" : "Non-fatal";
  const std::string d = detail.empty() ? info.name : std::string(detail);
  return "nvidia-nvswitch" + std::to_string(nvswitch) + ": SXid (PCI:" + normalize_pci_bus_id(pci) +
         "): " + std::to_string(code) + ", " + sev + ", Link " + std::to_string(link) + " " + d;
}

}  // namespace gpud::kmsg
