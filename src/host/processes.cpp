#include "host/processes.h"

#include <algorithm>
#include <charconv>

namespace gpud::host {

int64_t ProcessScan::count(char state) const {
  auto it = counts_by_state.find(state);
  return it == counts_by_state.end() ? 0 : it->second;
}

std::optional<ProcessStat> parse_proc_pid_stat(std::string_view text) {
  auto open = text.find('(');
  auto close = text.rfind(')');
  if (open == std::string_view::npos || close == std::string_view::npos || close < open)
    return std::nullopt;
  std::string_view pid_s = trim(text.substr(0, open));
  ProcessStat p;
  auto [ptr, ec] = std::from_chars(pid_s.data(), pid_s.data() + pid_s.size(), p.pid);
  if (ec != std::errc() || ptr != pid_s.data() + pid_s.size() || p.pid <= 0) return std::nullopt;
  p.comm = std::string(text.substr(open + 1, close - open - 1));
  std::string_view rest = trim(text.substr(close + 1));
  if (rest.empty()) return std::nullopt;
  p.state = rest.front();
  return p;
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
  std::string path;
  for (const std::string& name : *entries) {
    if (name.empty() ||
        !std::all_of(name.begin(), name.end(), [](char c) { return c >= '0' && c <= '9'; }))
      continue;
    path.assign("/proc/").append(name).append("/stat");
    auto text = fs.read(path, 4096);
    if (!text) continue;  // exited between list and read
    auto p = parse_proc_pid_stat(*text);
    if (!p) continue;
    ++scan.counts_by_state[p->state];
    scan.processes.push_back(std::move(*p));
  }
  std::sort(scan.processes.begin(), scan.processes.end(),
            [](const ProcessStat& a, const ProcessStat& b) { return a.pid < b.pid; });
  return scan;
}

}  // namespace gpud::host
