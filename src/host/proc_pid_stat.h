// The one reader of /proc/<pid>/stat: a process's pid, comm, state and start time, for the process
// scan, Xid attribution, and the ages of the fabric manager and containerd.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/health.h"
#include "core/result.h"
#include "host/host_fs.h"

namespace gpud::host {

struct ProcPidStat {
  int64_t pid = 0;
  std::string comm;  // as the kernel shows it: at most 15 bytes for a task, may hold ' ' and ')'
  char state = '?';  // R, S, D, Z, T, t, X, I, ...
  // Field 22, starttime: clock ticks after boot. nullopt when the line stops before it.
  std::optional<uint64_t> start_ticks;
  bool operator==(const ProcPidStat&) const = default;
};

// What is read of a /proc/<pid>/stat file. Its line is some 50 numbers after a comm of at most 64
// bytes (a kernel thread's); a longer file is not one.
inline constexpr size_t kProcPidStatMaxBytes = 4096;

// Parses "<pid> (<comm>) <state> ... <starttime> ...". comm may hold spaces and parentheses, so it
// ends at the LAST ')'. An error names what is missing or malformed; fields after the state are
// optional (a line cut short has no start_ticks) but, where present, starttime must be a number.
[[nodiscard]] Result<ProcPidStat> parse_proc_pid_stat(std::string_view text);

// Reads and parses /proc/<pid>/stat under the host root. An error when the process is gone, the
// file is longer than kProcPidStatMaxBytes, or it does not parse.
[[nodiscard]] Result<ProcPidStat> read_proc_pid_stat(const HostFs& fs, int64_t pid);

// How long after boot the process started (start_ticks over the clock tick rate); an error when
// the line has no starttime.
[[nodiscard]] Result<std::chrono::duration<double>> started_after_boot(const ProcPidStat& stat);

// When `pid` started: the host's boot time plus started_after_boot. nullopt when either is unknown.
std::optional<TimePoint> process_start_time(const HostFs& fs, int64_t pid);

}  // namespace gpud::host
