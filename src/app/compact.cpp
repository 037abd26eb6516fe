// `gpud compact`: VACUUMs the state database; refuses while a daemon uses the data dir.
#include <unistd.h>

#include <filesystem>
#include <iostream>
#include <memory>

#include "app/daemon.h"
#include "app/options.h"
#include "app/verbs.h"

namespace gpud::app {

void add_compact(CLI::App& app, int* exit_code) {
  auto dir = std::make_shared<std::string>();
  auto* cmd = app.add_subcommand("compact",
                                 "Compact (VACUUM) the state database; the daemon must be stopped");
  cmd->add_option("--data-dir", *dir,
                  "State directory (default /var/lib/gpud as root, ~/.gpud otherwise)");
  cmd->callback([dir, exit_code] {
    if (dir->empty()) *dir = default_data_dir();
    std::string path = *dir + "/" + store::kStateFileName;
    if (!std::filesystem::exists(path)) {
      std::cerr << "✘ no state database at " << path << "\n";
      *exit_code = kExitUsage;
      return;
    }
    auto lock = lock_data_dir(*dir);
    if (!lock) {
      std::cerr << "✘ refusing to compact while the daemon runs: " << lock.error().message << "\n";
      *exit_code = kExitUsage;
      return;
    }
    auto db = store::Database::open(path);
    if (!db) {
      ::close(*lock);
      std::cerr << "✘ " << db.error().message << "\n";
      *exit_code = kExitUsage;
      return;
    }
    int64_t before = (*db)->size_bytes().value_or(0);
    auto r = (*db)->vacuum();
    int64_t after = (*db)->size_bytes().value_or(0);
    db->reset();
    ::close(*lock);
    if (!r) {
      std::cerr << "✘ compact failed: " << r.error().message << "\n";
      *exit_code = kExitUsage;
      return;
    }
    std::cout << "✔ compacted " << path << ": " << before << " bytes before, " << after
              << " bytes after\n";
    *exit_code = kExitOk;
  });
}

}  // namespace gpud::app
