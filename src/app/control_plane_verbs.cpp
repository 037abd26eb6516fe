// GPUd's verbs that talk to its managed control plane or its release process (`login`, `notify`,
// `update`, `release`): gpud has neither, so each says what to do instead and exits
// kExitNoControlPlane, whatever flags and words follow (a GPUd script's `gpud login --token …`
// gets the answer, not a parse error).
#include <iostream>
#include <string>

#include "app/verbs.h"

namespace gpud::app {

namespace {

void add_refusing_verb(CLI::App& app, int* exit_code, const std::string& name,
                       const std::string& description, std::string answer) {
  auto* cmd = app.add_subcommand(name, description);
  cmd->allow_extras();
  cmd->callback([exit_code, answer = std::move(answer)] {
    std::cerr << "✘ " << answer << "\n";
    *exit_code = kExitNoControlPlane;
  });
  if (name == "notify") cmd->alias("nt");
}

}  // namespace

void add_control_plane_verbs(CLI::App& app, int* exit_code) {
  add_refusing_verb(
      app, exit_code, "login",
      "GPUd's control-plane login; gpud has no managed control plane (exits 3)",
      "gpud has no managed control plane, so there is nothing to log in to: the daemon serves "
      "its health API on this node (port 15132, docs/API.md); start it with `sudo gpud up` "
      "(GPUd's --token and --endpoint are accepted there and ignored)");
  add_refusing_verb(
      app, exit_code, "notify",
      "GPUd's startup/shutdown notice to its control plane; gpud has none (exits 3)",
      "gpud has no managed control plane to notify: the os component records each reboot when "
      "the daemon starts (`gpud metadata --reboot-history` lists them)");
  add_refusing_verb(app, exit_code, "update",
                    "GPUd's self-update; gpud is updated with its package (exits 3)",
                    "gpud does not update itself: install the new package (`sudo apt install "
                    "./gpud_<version>_amd64.deb`) or binary, then `sudo gpud up` restarts the "
                    "service with it");
  add_refusing_verb(app, exit_code, "release",
                    "GPUd's release signing keys and packages; not part of gpud (exits 3)",
                    "gpud does not sign releases with GPUd's release keys: `make deb` builds the "
                    "Debian package (docs/CLI.md, \"The Debian package\")");
}

}  // namespace gpud::app
