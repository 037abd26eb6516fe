// `gpud import-gpud-state`: imports GPUd's state file (events, reboot history, machine id) into
// gpud's store and reports what it did; `gpud run` does the same once by itself.
#include <unistd.h>

#include <filesystem>
#include <iostream>
#include <memory>

#include "app/daemon.h"
#include "app/gpud_state_migration.h"
#include "app/options.h"
#include "app/verbs.h"
#include "core/strings.h"
#include "core/time_util.h"
#include "store/database.h"
#include "store/event_store.h"
#include "store/metadata.h"

namespace gpud::app {

void add_import_gpud_state(CLI::App& app, int* exit_code) {
  struct Options {
    std::string data_dir;
    std::string from;
    std::string events_retention = "336h";
    std::string output_format = "plain";
    std::string log_level = "warn";
  };
  auto o = std::make_shared<Options>();
  auto* cmd = app.add_subcommand(
      "import-gpud-state",
      "Import GPUd's state file (events, reboot history, machine id) into gpud's store");
  cmd->add_option("--data-dir", o->data_dir,
                  "State directory (default /var/lib/gpud as root, ~/.gpud otherwise)");
  cmd->add_option("--from", o->from,
                  "GPUd's state file (default: <data-dir>/gpud.state when it is GPUd's, else "
                  "<data-dir>/gpud.state.GPUd)");
  cmd->add_option("--events-retention-period", o->events_retention,
                  "Events older than this are not imported")
      ->capture_default_str();
  cmd->add_option("--output-format", o->output_format, "plain or json")
      ->capture_default_str()
      ->check(CLI::IsMember({"plain", "json"}));
  cmd->add_option("--log-level,-l", o->log_level, "debug, info, warn or error")
      ->capture_default_str();
  cmd->callback([o, exit_code] {
    auto fail = [exit_code](const std::string& msg) {
      std::cerr << "✘ " << msg << "\n";
      *exit_code = kExitUsage;
    };
    if (auto r = setup_logging(o->log_level, ""); !r) return fail(r.error().message);
    auto retention = parse_duration(o->events_retention);
    if (!retention || retention->count() < 60'000)
      return fail("invalid --events-retention-period \"" + o->events_retention +
                  "\": want a duration such as 336h");
    const std::string dir = o->data_dir.empty() ? default_data_dir() : o->data_dir;
    if (auto r = ensure_data_dir(dir); !r) return fail(r.error().message);
    // The daemon imported at its start, and owns the store while it runs.
    auto lock = lock_data_dir(dir);
    if (!lock) return fail("refusing to import while the daemon runs: " + lock.error().message);
    struct Unlock {
      int fd;
      ~Unlock() { ::close(fd); }
    } unlock{*lock};

    const std::string store_path = dir + "/" + store::kStateFileName;
    std::error_code ec;
    const bool from_store_path =
        !o->from.empty() && std::filesystem::equivalent(o->from, store_path, ec) && !ec;
    // GPUd's file where gpud's store goes is moved aside first, as `gpud run` does, whatever
    // --from names: the store must not open GPUd's file.
    auto found = find_gpud_state(dir, true);
    if (!found) return fail(found.error().message);
    std::string from = o->from;
    if (from.empty() || from_store_path) {
      if (!*found)
        return fail("no GPUd state file at " + store_path + " or " + store_path +
                    store::kGpudStateMovedSuffix + " (give --from)");
      from = **found;
    }
    auto db = store::Database::open(store_path);
    if (!db) return fail(db.error().message);
    store::EventStore events(**db);
    store::Metadata meta(**db);
    auto report = store::import_gpud_state(
        from, events, meta,
        gpud_import_options(std::chrono::duration_cast<std::chrono::seconds>(*retention)));
    if (!report) return fail("cannot import GPUd's state: " + report.error().message);
    nlohmann::json record = to_json(*report);
    record["time"] = format_rfc3339(Clock::now());
    if (auto r = meta.set(store::kKeyGpudStateImport, record.dump()); !r)
      return fail("imported, but cannot record the import: " + r.error().message);
    if (o->output_format == "json") {
      std::cout << to_json(*report).dump(2) << "\n";
    } else {
      std::cout << "✔ " << summarize_import(*report) << "\n";
      for (const auto& [component, n] : report->read_by_component) {
        auto stored = report->stored_by_component.find(component);
        std::cout << "  " << component << ": " << n << " read, "
                  << (stored == report->stored_by_component.end() ? 0 : stored->second) << " new\n";
      }
      if (!report->tables_without_component.empty())
        std::cout << "  not imported (no such gpud component): "
                  << join(report->tables_without_component, ", ") << "\n";
    }
    *exit_code = report->table_errors.empty() ? kExitOk : kExitUnhealthy;
  });
}

}  // namespace gpud::app
