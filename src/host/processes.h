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
#include "host/proc_pid_stat.h"

namespace gpud::host {

struct ProcessScan {
  std::vector<ProcPidStat> processes;  // sorted by pid
  std::map<char, int64_t> counts_by_state;
  int64_t count(char state) const;
};

// "running", "sleeping", "disk-sleep", "zombie", ... (ps(1) names; "unknown" otherwise).
std::string_view process_state_name(char state);
// Scans every numeric entry of /proc (read_proc_pid_stat); processes that vanish mid-scan, and
// stat files that do not parse, are skipped silently.
ProcessScan scan_processes(const HostFs& fs);

}  // namespace gpud::host
