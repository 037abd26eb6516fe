// Migration from GPUd: finding GPUd's state file where a node that ran GPUd left it, and importing
// it into gpud's store once (gpud run) or on demand (gpud import-gpud-state).
#pragma once

#include <chrono>
#include <optional>
#include <string>

#include "core/result.h"
#include "store/gpud_state_import.h"

namespace gpud::app {

// GPUd's state file for `data_dir`, if there is one. GPUd kept it at <data-dir>/gpud.state, the
// path of gpud's own store: found there, it is moved to gpud.state.GPUd (contents untouched) so
// that gpud's store can take its place, unless `store_on_disk` is false (--db-in-memory: it is
// read where it is). A gpud.state that holds gpud's store inside GPUd's file (a gpud verb opened
// it before any `gpud run`) is read where it is too. Otherwise gpud.state.GPUd, left by an earlier
// start, when it exists. A file at gpud.state that is not a readable database is left to the
// store, which moves it aside.
Result<std::optional<std::string>> find_gpud_state(const std::string& data_dir, bool store_on_disk);

// Options for importing into gpud's store: gpud's components, the events retention.
store::GpudImportOptions gpud_import_options(std::chrono::seconds events_retention);

// Imports `source` unless the store records an import already (kKeyGpudStateImport); logs the
// outcome in one line and records it, a failure too (as a warning: `gpud import-gpud-state`
// retries it), so that later starts do not import again.
void import_gpud_state_once(const std::string& source, store::EventStore& events,
                            store::Metadata& metadata, std::chrono::seconds events_retention);

// One line on what an import did ("imported 12 events (2 reboots) ... from ...").
std::string summarize_import(const store::GpudImportReport& report);

}  // namespace gpud::app
