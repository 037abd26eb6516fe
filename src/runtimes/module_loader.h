// Loads one of gpud's optional client modules (libgpud-<name>.so: the CRI client, the docker
// client), which carry the libraries a host without those daemons never needs (gRPC, libcurl):
// the daemon loads a module only when the daemon it talks to has a socket, so its idle footprint
// stays the same without them.
#pragma once

#include <string>

#include "core/result.h"

namespace gpud::runtimes {

// Where a module is looked for, in order: $GPUD_MODULE_DIR, the folder of the running executable
// (the build tree), and <that folder>/../lib/gpud (an installed package).
std::string module_search_path();

// dlopen()s libgpud-<name>.so once per process (later calls return the same handle) and returns
// the address of `symbol` in it, or why the module or the symbol could not be found (every place
// looked in, with dlerror()'s words).
Result<void*> load_module_symbol(const std::string& name, const char* symbol);

}  // namespace gpud::runtimes
