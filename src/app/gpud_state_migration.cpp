#include "app/gpud_state_migration.h"

#include <filesystem>

#include "components/registry.h"
#include "core/log.h"
#include "core/strings.h"
#include "core/time_util.h"

namespace gpud::app {

Result<std::optional<std::string>> find_gpud_state(const std::string& data_dir,
                                                   bool store_on_disk) {
  const std::string path = data_dir + "/" + store::kStateFileName;
  const std::string moved = path + store::kGpudStateMovedSuffix;
  auto kind = store::inspect_state_file(path);
  if (kind && *kind == store::StateFileKind::kGpudGo) {
    if (!store_on_disk) return std::optional<std::string>(path);
    auto target = store::move_gpud_state_aside(path);
    if (!target) return target.error();
    logger("store")->warn(
        "{} is GPUd's state file: moved it to {} (unchanged; to return to GPUd, stop gpud and "
        "move it back) so that gpud's own store takes its place",
        path, *target);
    return std::optional<std::string>(*target);
  }
  if (kind && *kind == store::StateFileKind::kGpudInGpudGo) return std::optional<std::string>(path);
  std::error_code ec;
  if (std::filesystem::is_regular_file(moved, ec)) return std::optional<std::string>(moved);
  return std::optional<std::string>();
}

store::GpudImportOptions gpud_import_options(std::chrono::seconds events_retention) {
  store::GpudImportOptions o;
  o.components = components::known_names();
  o.retention = events_retention;
  o.now = Clock::now();
  return o;
}

std::string summarize_import(const store::GpudImportReport& r) {
  std::string text = "imported " + std::to_string(r.events_stored()) + " events (" +
                     std::to_string(r.reboots_stored) + " reboots) from GPUd's state file " +
                     r.source;
  const uint64_t skipped = r.skipped_older + r.skipped_future + r.skipped_beyond_cap +
                           r.skipped_malformed + r.skipped_too_big;
  if (skipped > 0) text += "; skipped " + std::to_string(skipped);
  if (r.skipped_older > 0)
    text += " (" + std::to_string(r.skipped_older) + " older than the events retention)";
  if (r.machine_id) text += "; machine id " + *r.machine_id;
  if (r.previous_machine_id) text += " (was " + *r.previous_machine_id + ")";
  if (!r.table_errors.empty()) text += "; unreadable: " + join(r.table_errors, "; ");
  return text;
}

void import_gpud_state_once(const std::string& source, store::EventStore& events,
                            store::Metadata& metadata, std::chrono::seconds events_retention) {
  auto done = metadata.get(store::kKeyGpudStateImport);
  if (!done) {
    logger("store")->warn("cannot tell whether GPUd's state was imported ({}); not importing",
                          done.error().message);
    return;
  }
  if (done->has_value()) return;
  auto report =
      store::import_gpud_state(source, events, metadata, gpud_import_options(events_retention));
  nlohmann::json record;
  if (report) {
    logger("store")->info("{}", summarize_import(*report));
    record = to_json(*report);
  } else {
    logger("store")->warn(
        "did not import GPUd's state: {} (gpud starts without GPUd's history; `gpud "
        "import-gpud-state --from {}` retries)",
        report.error().message, source);
    record = {{"source", source}, {"error", report.error().message}};
  }
  record["time"] = format_rfc3339(Clock::now());
  if (auto r = metadata.set(store::kKeyGpudStateImport, record.dump()); !r)
    logger("store")->warn("cannot record the import of GPUd's state: {}", r.error().message);
}

}  // namespace gpud::app
