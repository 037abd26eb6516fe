#include "host/os_info.h"

#include <charconv>
#include <cmath>
#include <cstdlib>

namespace gpud::host {
namespace {

std::optional<int64_t> to_int64(std::string_view s) {
  int64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
  return v;
}

std::string read_trimmed(const HostFs& fs, std::string_view path) {
  auto r = fs.read_line(path);
  return r ? std::move(r).value() : std::string();
}

std::optional<int64_t> read_int_opt(const HostFs& fs, std::string_view path) {
  auto r = fs.read_int(path);
  if (!r) return std::nullopt;
  return *r;
}

}  // namespace

std::string parse_os_release_pretty_name(std::string_view text) {
  constexpr std::string_view kKey = "PRETTY_NAME=";
  for (std::string_view line : split_lines(text)) {
    line = trim(line);
    if (!line.starts_with(kKey)) continue;
    std::string_view v = trim(line.substr(kKey.size()));
    if (v.size() >= 2 && (v.front() == '"' || v.front() == '\'') && v.back() == v.front())
      v = v.substr(1, v.size() - 2);
    // os-release(5) allows shell escapes inside double quotes: \" \\ \$ \`.
    std::string out;
    for (size_t i = 0; i < v.size(); ++i) {
      if (v[i] == '\\' && i + 1 < v.size()) ++i;
      out += v[i];
    }
    return out;
  }
  return {};
}

std::optional<int64_t> parse_proc_stat_btime(std::string_view text) {
  for (std::string_view line : split_lines(text)) {
    auto f = split_fields(line);
    if (f.size() >= 2 && f[0] == "btime") return to_int64(f[1]);
  }
  return std::nullopt;
}

std::optional<double> parse_proc_uptime_seconds(std::string_view text) {
  auto f = split_fields(trim(text));
  if (f.empty()) return std::nullopt;
  // from_chars for double is available in libstdc++ 11+, but keep it locale-free and simple.
  std::string s(f[0]);
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size() || !std::isfinite(v) || v < 0) return std::nullopt;
  return v;
}

std::optional<int64_t> parse_file_nr_allocated(std::string_view text) {
  auto f = split_fields(trim(text));
  if (f.empty()) return std::nullopt;
  return to_int64(f[0]);
}

std::string read_machine_id(const HostFs& fs) {
  for (std::string_view p : {"/etc/machine-id", "/var/lib/dbus/machine-id"}) {
    std::string id = read_trimmed(fs, p);
    if (!id.empty()) return id;
  }
  return {};
}

std::optional<TimePoint> read_boot_time(const HostFs& fs, TimePoint now) {
  if (auto stat = fs.read("/proc/stat"); stat) {
    if (auto bt = parse_proc_stat_btime(*stat); bt && *bt > 0)
      return TimePoint(std::chrono::seconds(*bt));
  }
  if (auto up = fs.read("/proc/uptime"); up) {
    if (auto secs = parse_proc_uptime_seconds(*up)) {
      auto boot =
          now - std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(*secs));
      return std::chrono::time_point_cast<std::chrono::seconds>(boot);
    }
  }
  return std::nullopt;
}

OsInfo read_os_info(const HostFs& fs, TimePoint now) {
  OsInfo info;
  info.kernel_version = read_trimmed(fs, "/proc/sys/kernel/osrelease");
  if (auto r = fs.read("/etc/os-release"); r) info.os_image = parse_os_release_pretty_name(*r);
  info.hostname = read_trimmed(fs, "/proc/sys/kernel/hostname");
  info.boot_id = read_trimmed(fs, "/proc/sys/kernel/random/boot_id");
  info.machine_id = read_machine_id(fs);
  if (auto r = fs.read("/proc/uptime"); r) info.uptime_seconds = parse_proc_uptime_seconds(*r);
  info.boot_time = read_boot_time(fs, now);
  info.pid_max = read_int_opt(fs, "/proc/sys/kernel/pid_max");
  if (auto r = fs.read("/proc/sys/fs/file-nr"); r)
    info.file_handles_allocated = parse_file_nr_allocated(*r);
  info.file_max = read_int_opt(fs, "/proc/sys/fs/file-max");
  return info;
}

}  // namespace gpud::host
