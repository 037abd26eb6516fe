// Any bytes as /etc/gpud/gpud.yaml: parsed, applied to `gpud run`'s options and validated, as
// `gpud run --config FILE` does. A bad file is an error that names it, never a crash.

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

#include "app/config_file.h"
#include "app/options.h"

using namespace gpud;  // NOLINT(google-build-using-namespace)

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  (void)app::parse_config_yaml(text, "fuzz.yaml");
  static const std::string path = (std::filesystem::temp_directory_path() /
                                   ("gpud-config-fuzz-" + std::to_string(::getpid()) + ".yaml"))
                                      .string();
  // The input file goes with the process (libFuzzer and the regression test both exit normally).
  static const struct RemoveAtExit {
    ~RemoveAtExit() {
      std::error_code ignored;
      std::filesystem::remove(path, ignored);
    }
  } remove_at_exit;
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << text;
  }
  // `gpud run --config FILE`: the verb's options, its --config named on the command line.
  app::RunCommandLine cmd;
  std::string config;
  app::add_config_option(cmd.app, config);
  if (!cmd.parse({"--config", path})) return 0;
  if (app::apply_config_file(cmd.app, config)) (void)app::validate_run_flags(cmd.flags, cmd.sample);
  return 0;
}
