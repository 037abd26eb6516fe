#include "app/cli.h"

#include <CLI/CLI.hpp>
#include <iostream>

#include "core/version.h"

namespace gpud::app {

int run_cli(int argc, char** argv) {
  CLI::App app{"gpud: GPU node health daemon"};
  app.require_subcommand(1);
  auto* version = app.add_subcommand("version", "Print the version");
  version->callback([] { std::cout << "gpud " << kVersion << " (" << kGitRevision << ")\n"; });
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  return 0;
}

}  // namespace gpud::app
