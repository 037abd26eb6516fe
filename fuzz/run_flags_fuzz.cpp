// Any bytes as `gpud run`'s argument list (NUL-separated): parsed and validated as the daemon and
// `gpud up` do, JSON-valued flags (--xid-thresholds, --nvlink-expected-link-states) included. A bad
// flag is an error, never a crash.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "app/options.h"

using namespace gpud;  // NOLINT(google-build-using-namespace)

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<std::string> args(1);
  for (size_t i = 0; i < size; ++i) {
    if (data[i] == 0)
      args.emplace_back();
    else
      args.back().push_back(static_cast<char>(data[i]));
  }
  app::RunCommandLine cmd;
  if (cmd.parse(args)) (void)app::validate_run_flags(cmd.flags, cmd.sample);
  return 0;
}
