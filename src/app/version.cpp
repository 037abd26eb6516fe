// `gpud version`.
#include "core/version.h"

#include <iostream>
#include <string>

#include "app/verbs.h"

namespace gpud::app {

std::string version_text() {
  return "gpud " + std::string(kVersion) + " (" + std::string(kGitRevision) + ")";
}

void add_version(CLI::App& app, int* exit_code) {
  auto* cmd = app.add_subcommand("version", "Print gpud's version and git revision");
  cmd->callback([exit_code] {
    std::cout << version_text() << "\n";
    *exit_code = kExitOk;
  });
  // `gpud --version` says the same (CLI::CallForVersion, caught in run_cli).
  app.set_version_flag("--version", version_text, "Print gpud's version and git revision");
}

}  // namespace gpud::app
