// The gpud command line: parses argv with CLI11 and dispatches to one verb.
#pragma once

namespace gpud::app {

// Returns the process exit code.
int run_cli(int argc, char** argv);

}  // namespace gpud::app
