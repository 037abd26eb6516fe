#include "app/cli.h"

#include <CLI/CLI.hpp>
#include <functional>
#include <iostream>

#include "app/verbs.h"

namespace gpud::app {

namespace {

// Parses argv and runs the verb; kExitOk, or the exit code of a usage error or a help text.
int parse_cli(int argc, char** argv, int& exit_code, std::function<void()>& serve) {
  CLI::App app{"gpud: GPU node health daemon (GPUd-compatible API on port 15132)", "gpud"};
  app.require_subcommand(1);
  app.set_help_all_flag("--help-all", "Show help for every verb");
  add_run(app, &exit_code, &serve);
  add_scan(app, &exit_code);
  add_status(app, &exit_code);
  add_machine_info(app, &exit_code);
  add_set_healthy(app, &exit_code);
  add_npd_check(app, &exit_code);
  add_slurm_health_check(app, &exit_code);
  add_trigger_check(app, &exit_code);
  add_compact(app, &exit_code);
  add_plugin_verbs(app, &exit_code);
  add_version(app, &exit_code);
  add_inject_fault(app, &exit_code);
  add_up(app, &exit_code);
  add_down(app, &exit_code);
  add_metadata(app, &exit_code);
  add_import_gpud_state(app, &exit_code);
  add_control_plane_verbs(app, &exit_code);
  add_cri_helper(app, &exit_code);
  add_tls_material(app, &exit_code);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return kExitUsage;
  }
  return kExitOk;
}

}  // namespace

int run_cli(int argc, char** argv) {
  int exit_code = kExitOk;
  std::function<void()> serve;
  if (int r = parse_cli(argc, argv, exit_code, serve); r != kExitOk) return r;
  if (serve) serve();
  return exit_code;
}

}  // namespace gpud::app
