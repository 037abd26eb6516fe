#include "host/processes.h"

#include <algorithm>
#include <charconv>

#include "core/parse_number.h"

namespace gpud::host {

int64_t ProcessScan::count(char state) const {
  auto it = counts_by_state.find(state);
  return it == counts_by_state.end() ? 0 : it->second;
}

std::string_view process_state_name(char state) {
  switch (state) {
    case 'R': return "running";
    case 'S': return "sleeping";
    case 'D': return "disk-sleep";
    case 'Z': return "zombie";
    case 'T': return "stopped";
    case 't': return "tracing-stop";
    case 'X':
    case 'x': return "dead";
    case 'I': return "idle";
    case 'K': return "wakekill";
    case 'W': return "waking";
    case 'P': return "parked";
    default: return "unknown";
  }
}

ProcessScan scan_processes(const HostFs& fs) {
  ProcessScan scan;
  auto entries = fs.list("/proc");
  if (!entries) return scan;
  for (const std::string& name : *entries) {
    if (name.empty() ||
        !std::all_of(name.begin(), name.end(), [](char c) { return c >= '0' && c <= '9'; }))
      continue;
    auto pid = parse_integer<int64_t>(name);
    if (!pid) continue;
    auto p = read_proc_pid_stat(fs, *pid);
    if (!p) continue;  // exited between list and read
    ++scan.counts_by_state[p->state];
    scan.processes.push_back(std::move(*p));
  }
  std::sort(scan.processes.begin(), scan.processes.end(),
            [](const ProcPidStat& a, const ProcPidStat& b) { return a.pid < b.pid; });
  return scan;
}

}  // namespace gpud::host
