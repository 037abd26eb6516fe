// OsInfo: kernel, OS image, identity (hostname, boot id, machine id), boot time and kernel limits
// of the host, read through HostFs.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/health.h"
#include "host/host_fs.h"

namespace gpud::host {

struct OsInfo {
  std::string kernel_version;  // /proc/sys/kernel/osrelease
  std::string os_image;        // PRETTY_NAME of /etc/os-release
  std::string operating_system = "linux";
  std::string hostname;                           // /proc/sys/kernel/hostname
  std::string boot_id;                            // /proc/sys/kernel/random/boot_id
  std::string machine_id;                         // /etc/machine-id, else /var/lib/dbus/machine-id
  std::optional<double> uptime_seconds;           // /proc/uptime
  std::optional<TimePoint> boot_time;             // btime of /proc/stat, else now - uptime
  std::optional<int64_t> pid_max;                 // /proc/sys/kernel/pid_max
  std::optional<int64_t> file_handles_allocated;  // first field of /proc/sys/fs/file-nr
  std::optional<int64_t> file_max;                // /proc/sys/fs/file-max
};

// PRETTY_NAME of an os-release file, unquoted ("" when absent).
std::string parse_os_release_pretty_name(std::string_view text);
// The "btime <unix seconds>" line of /proc/stat.
std::optional<int64_t> parse_proc_stat_btime(std::string_view text);
// The first field of /proc/uptime (seconds since boot).
std::optional<double> parse_proc_uptime_seconds(std::string_view text);
// The first field of /proc/sys/fs/file-nr (allocated file handles).
std::optional<int64_t> parse_file_nr_allocated(std::string_view text);

std::string read_machine_id(const HostFs& fs);
// btime of /proc/stat (stable to the second); falls back to now - /proc/uptime.
std::optional<TimePoint> read_boot_time(const HostFs& fs, TimePoint now = Clock::now());
// Reads everything; fields it cannot read stay empty.
OsInfo read_os_info(const HostFs& fs, TimePoint now = Clock::now());

}  // namespace gpud::host
