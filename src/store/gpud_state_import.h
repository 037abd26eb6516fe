// Import of GPUd's state file: the SQLite database that GPUd (github.com/leptonai/gpud, the Go
// daemon gpud reimplements) keeps at <data-dir>/gpud.state, the very path of gpud's own store. Its
// component events (the os component's among them: the reboot history) and its machine id are
// copied into gpud's store, so that a node switched from GPUd keeps its history. GPUd's file is
// only ever opened read-only.
//
// Throughout this file "GPUd" is the Go daemon and "gpud" this program.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/health.h"
#include "core/result.h"
#include "store/event_store.h"
#include "store/metadata.h"

namespace gpud::store {

// Where gpud moves GPUd's file (and its -wal, -shm, -journal side files, under the same suffix)
// when it finds it at the path of its own store: "gpud.state" becomes "gpud.state.GPUd".
inline constexpr const char* kGpudStateMovedSuffix = ".GPUd";
// Metadata key: the outcome of the import `gpud run` made (a JSON report), so that it runs once.
inline constexpr const char* kKeyGpudStateImport = "gpud_state_import";

// Bounds on what one import reads, whatever the file holds.
inline constexpr size_t kGpudImportMaxEventsPerComponent = 100000;
inline constexpr size_t kGpudImportMaxNameBytes = 256;
inline constexpr size_t kGpudImportMaxMessageBytes = 4096;
inline constexpr size_t kGpudImportMaxExtraInfoBytes = 64 * 1024;
// SQLite refuses to read a value larger than this (the row is skipped): no row of a hostile file
// makes gpud hold more.
inline constexpr int kGpudImportMaxValueBytes = 1024 * 1024;
// Events dated further ahead than this (a wrong clock, a forged row) are skipped.
inline constexpr std::chrono::hours kGpudImportFutureSlack{24};

// Whose state file a path holds.
enum class StateFileKind {
  kAbsent,  // no file, or an empty one (SQLite's empty database)
  kGpud,    // gpud's own store (its schema_version key or its events table), none of GPUd's tables
  kGpudGo,  // GPUd's: some of GPUd's tables and none of gpud's
  // gpud's store inside GPUd's file: a gpud verb (or a gpud without this import) opened GPUd's
  // file where it was and added its own tables. GPUd's tables are imported from it in place.
  kGpudInGpudGo,
  kOther,  // a SQLite database with neither's tables
};

// Opens `path` read-only and tells whose it is; a file that is not a readable SQLite database is an
// error naming the path.
[[nodiscard]] Result<StateFileKind> inspect_state_file(const std::string& path);

// Moves GPUd's file at `path` and its side files to path + kGpudStateMovedSuffix (contents
// untouched: SQLite finds the moved WAL beside the moved file). Refuses when the target exists.
// Returns the new path.
[[nodiscard]] Result<std::string> move_gpud_state_aside(const std::string& path);

// The table GPUd keeps a component's events in (schema "v0_5_0", or the older "v0_4_0"):
// components_<name>_events_<schema>, the name lower-cased, '-' and ' ' made '_', "__" made '_'.
std::string gpud_events_table(std::string_view component, std::string_view schema);

struct GpudImportOptions {
  std::vector<std::string> components;  // gpud's component names: only their events are imported
  std::chrono::seconds retention{std::chrono::hours(24 * 14)};  // older events are skipped
  TimePoint now = Clock::now();
  size_t max_events_per_component = kGpudImportMaxEventsPerComponent;
};

// What one import found and did.
struct GpudImportReport {
  std::string source;
  // Per gpud component: events read from GPUd's tables and, of those, stored anew (the others
  // were stored already: an import run twice stores nothing the second time).
  std::map<std::string, uint64_t> read_by_component;
  std::map<std::string, uint64_t> stored_by_component;
  uint64_t reboots_stored = 0;      // the os component's "reboot" events among them
  uint64_t skipped_older = 0;       // older than the retention period
  uint64_t skipped_future = 0;      // dated beyond now + kGpudImportFutureSlack
  uint64_t skipped_beyond_cap = 0;  // past max_events_per_component (the oldest ones)
  uint64_t skipped_malformed = 0;   // no name, a timestamp that is no integer
  uint64_t skipped_too_big = 0;     // a value over kGpudImportMaxValueBytes
  uint64_t messages_truncated = 0;  // cut to kGpudImportMaxMessageBytes
  uint64_t extra_info_dropped = 0;  // not a JSON object, or over kGpudImportMaxExtraInfoBytes
  std::vector<std::string> tables_without_component;  // GPUd event tables gpud has no component for
  std::vector<std::string> table_errors;              // "<table>: <why>"; the others were read
  std::optional<std::string> machine_id;              // GPUd's, now gpud's
  std::optional<std::string> previous_machine_id;     // gpud's before, when it differed
  uint64_t events_stored() const;
};

nlohmann::json to_json(const GpudImportReport& report);

// Reads GPUd's state file at `path` (read-only) and stores its events in `events` and its machine
// id in `metadata`. A file that is not SQLite, is corrupt, or holds none of GPUd's tables is an
// error and nothing is imported; a table that fails part way is named in table_errors. `path` may
// be the file `events` writes to (kGpudInGpudGo): it is read through a connection of its own.
[[nodiscard]] Result<GpudImportReport> import_gpud_state(const std::string& path,
                                                         EventStore& events, Metadata& metadata,
                                                         const GpudImportOptions& options);

}  // namespace gpud::store
