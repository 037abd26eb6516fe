// Which process serves a unix socket: the containerd component's uptime grace needs the age
// (host/proc_pid_stat.h) of the containerd behind its socket, not of any process named containerd
// (docker and other runtimes start containerds of their own).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "host/host_fs.h"

namespace gpud::host {

// The inodes of the sockets bound to `path` in the text of /proc/net/unix ("Num RefCount Protocol
// Flags Type St Inode Path" rows); a listener and the connections it accepted all show the path.
std::vector<uint64_t> unix_socket_inodes(std::string_view proc_net_unix, std::string_view path);

// The lowest pid whose comm is `comm` and that holds one of the sockets bound to `path` (a path
// as the serving process sees it, i.e. without the host root) open, read under the host root's
// /proc; nullopt when none does or /proc cannot be read.
std::optional<int64_t> unix_socket_owner(const HostFs& fs, std::string_view path,
                                         std::string_view comm);

}  // namespace gpud::host
