// The fabric manager's log as accelerator-nvidia-fabric-manager reads it: the lines of
// /var/log/fabricmanager.log (and of the nvidia-fabricmanager.service journal where journald runs)
// that the reference's matchers name, as Warning events. Read at each check from where the last
// read stopped; the events carry the time the line was logged, so a restart re-reading its backlog
// stores nothing twice.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/health.h"
#include "host/log_tail.h"

namespace gpud::components {

// Event names (GPUd's).
inline constexpr std::string_view kFmFatalError = "fabricmanager_nvswitch_fatal_error";
inline constexpr std::string_view kFmNonFatalError = "fabricmanager_nvswitch_non_fatal_error";
inline constexpr std::string_view kFmNvlinkFailure = "fabricmanager_nvswitch_nvlink_failure";
inline constexpr std::string_view kFmTopologyMismatch = "fabricmanager_nvswitch_topology_mismatch";
inline constexpr std::string_view kFmNothingToDo = "fabricmanager_nvswitch_nothing_to_do";

// What one matching line says.
struct FabricManagerLogMatch {
  std::string_view name;              // one of the event names above
  std::string message;                // the line without its "[date] [LEVEL] [tid N]" prefix
  std::optional<TimePoint> logged;    // the line's "[Mon DD YYYY HH:MM:SS]" time (local time)
  std::optional<int> nvswitch_error;  // the error number of a fatal / non-fatal NVSwitch error
};

// The matcher for one line of the fabric manager's log; nullopt for a line no rule names.
std::optional<FabricManagerLogMatch> match_fabric_manager_line(std::string_view line);

// "[Jul 21 2023 10:17:34] ..." -> that time, read as local time; nullopt without such a prefix.
std::optional<TimePoint> parse_fabric_manager_time(std::string_view line);

// One entry of `journalctl -o json`: its MESSAGE (a string, or an array of bytes when it is not
// UTF-8), __REALTIME_TIMESTAMP (microseconds) and __CURSOR. nullopt for a line that is not such an
// object.
struct JournalEntry {
  std::string message;
  std::optional<TimePoint> time;
  std::string cursor;
};
std::optional<JournalEntry> parse_journal_json_line(std::string_view line);

// Reads what the fabric manager logged since the last call: the log file's new lines and, where
// `journal` is set, the unit's journal after the last cursor (`journalctl` with a deadline).
class FabricManagerLogReader {
 public:
  struct Journal {
    std::string journalctl;   // the program (found on PATH)
    std::string search_path;  // PATH for it
    std::string root;         // --root=<host root> where gpud reads another root; "" for "/"
    std::chrono::milliseconds timeout{2000};
  };
  explicit FabricManagerLogReader(std::string log_file);

  struct Read {
    std::vector<Event> events;        // matching lines as events of `component`, oldest first
    std::vector<std::string> errors;  // what could not be read (the file, the journal)
    bool file_missing = false;
  };
  // `now` stamps a line without a time of its own that was read live; such a line in the first
  // read's backlog is skipped, since its time is unknown.
  Read read(std::string_view component, const std::optional<Journal>& journal, TimePoint now);

 private:
  host::LogTail tail_;
  std::string cursor_;  // the journal's last entry read; "" before the first read
};

}  // namespace gpud::components
