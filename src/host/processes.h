// Processes: a cheap scan of /proc/<pid>/stat (one read per pid) for the os component: each
// process's pid, comm and state, and counts by state.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "host/host_fs.h"

namespace gpud::host {

struct ProcessStat {
  int64_t pid = 0;
  std::string comm;
  char state = '?';  // R, S, D, Z, T, t, X, I, ...
  bool operator==(const ProcessStat&) const = default;
};

struct ProcessScan {
  std::vector<ProcessStat> processes;  // sorted by pid
  std::map<char, int64_t> counts_by_state;
  int64_t count(char state) const;
};

// Parses "<pid> (<comm>) <state> ...". comm may hold spaces and parentheses, so it ends at the LAST
// ')'.
std::optional<ProcessStat> parse_proc_pid_stat(std::string_view text);
// "running", "sleeping", "disk-sleep", "zombie", ... (ps(1) names; "unknown" otherwise).
std::string_view process_state_name(char state);
// Scans every numeric entry of /proc; processes that vanish mid-scan are skipped silently.
ProcessScan scan_processes(const HostFs& fs);

}  // namespace gpud::host
