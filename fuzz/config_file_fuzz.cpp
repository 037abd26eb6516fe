// Any bytes as /etc/gpud/gpud.yaml: parsed, applied to `gpud run`'s options and validated, as
// `gpud run --config FILE` does. A bad file is an error that names it, never a crash.

#include <cstddef>
#include <cstdint>
#include <string>

#include "app/config_file.h"
#include "app/options.h"
#include "fuzz/input_file.h"

using namespace gpud;  // NOLINT(google-build-using-namespace)

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  (void)app::parse_config_yaml(text, "fuzz.yaml");
  static const fuzz::InputFile file("gpud-config-fuzz", ".yaml");
  file.write(data, size);
  // `gpud run --config FILE`: the verb's options, its --config named on the command line.
  app::RunCommandLine cmd;
  std::string config;
  app::add_config_option(cmd.app, config);
  if (!cmd.parse({"--config", file.path()})) return 0;
  if (app::apply_config_file(cmd.app, config)) (void)app::validate_run_flags(cmd.flags, cmd.sample);
  return 0;
}
