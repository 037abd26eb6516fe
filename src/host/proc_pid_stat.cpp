#include "host/proc_pid_stat.h"

#include <unistd.h>

#include "core/parse_number.h"
#include "core/strings.h"
#include "host/os_info.h"

namespace gpud::host {

Result<ProcPidStat> parse_proc_pid_stat(std::string_view text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == '\0')) text.remove_suffix(1);
  const size_t open = text.find('(');
  const size_t close = text.rfind(')');
  if (open == std::string_view::npos || close == std::string_view::npos || close < open)
    return make_error("not a /proc/<pid>/stat line: no \"(comm)\"");
  ProcPidStat p;
  const std::string_view pid_text = trim(text.substr(0, open));
  auto pid = parse_integer<int64_t>(pid_text);
  if (!pid || *pid <= 0)
    return make_error("not a /proc/<pid>/stat line: \"" + std::string(pid_text) +
                      "\" is not a pid");
  p.pid = *pid;
  p.comm = std::string(text.substr(open + 1, close - open - 1));
  // f[0] is field 3 (state); starttime, field 22, is f[19].
  const auto f = split_fields(text.substr(close + 1));
  if (f.empty() || f[0].size() != 1)
    return make_error("not a /proc/<pid>/stat line: no state after the comm");
  p.state = f[0][0];
  if (f.size() > 19) {
    const std::string_view ticks = f[19];
    auto v = parse_integer<uint64_t>(ticks);
    if (!v)
      return make_error("/proc/<pid>/stat of pid " + std::to_string(p.pid) + ": starttime \"" +
                        std::string(ticks) + "\" is not a number");
    p.start_ticks = *v;
  }
  return p;
}

Result<ProcPidStat> read_proc_pid_stat(const HostFs& fs, int64_t pid) {
  const std::string path = "/proc/" + std::to_string(pid) + "/stat";
  // One byte past the cap tells a file that is too long from one that fits exactly.
  auto text = fs.read(path, kProcPidStatMaxBytes + 1);
  if (!text) return text.error();
  if (text->size() > kProcPidStatMaxBytes)
    return make_error(fs.path(path) + ": longer than " + std::to_string(kProcPidStatMaxBytes) +
                      " bytes");
  auto p = parse_proc_pid_stat(*text);
  if (!p) return make_error(fs.path(path) + ": " + p.error().message);
  return p;
}

Result<std::chrono::duration<double>> started_after_boot(const ProcPidStat& stat) {
  if (!stat.start_ticks)
    return make_error("/proc/<pid>/stat of pid " + std::to_string(stat.pid) +
                      " stops before starttime");
  static const long ticks_per_second = ::sysconf(_SC_CLK_TCK);
  if (ticks_per_second <= 0) return make_error("the clock tick rate (_SC_CLK_TCK) is unknown");
  return std::chrono::duration<double>(static_cast<double>(*stat.start_ticks) /
                                       static_cast<double>(ticks_per_second));
}

std::optional<TimePoint> process_start_time(const HostFs& fs, int64_t pid) {
  auto stat = read_proc_pid_stat(fs, pid);
  if (!stat) return std::nullopt;
  auto after = started_after_boot(*stat);
  if (!after) return std::nullopt;
  auto boot = read_boot_time(fs);
  if (!boot) return std::nullopt;
  return *boot + std::chrono::duration_cast<TimePoint::duration>(*after);
}

}  // namespace gpud::host
