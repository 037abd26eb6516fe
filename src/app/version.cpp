// `gpud version`.
#include "core/version.h"

#include <iostream>

#include "app/verbs.h"

namespace gpud::app {

void add_version(CLI::App& app, int* exit_code) {
  auto* cmd = app.add_subcommand("version", "Print gpud's version");
  cmd->callback([exit_code] {
    std::cout << "gpud " << kVersion << " (" << kGitRevision << ")\n";
    *exit_code = kExitOk;
  });
}

}  // namespace gpud::app
