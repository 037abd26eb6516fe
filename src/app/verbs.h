// One function per CLI verb; each registers its subcommand and returns a pointer to its exit code
// slot.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <string>

namespace gpud::app {

// Each add_* registers a subcommand whose callback stores the verb's exit code in *exit_code.
// `run` checks its flags in the callback and leaves the daemon in *serve, which run_cli calls once
// the parser (every verb's options, hundreds of strings and functions) is gone.
void add_run(CLI::App& app, int* exit_code, std::function<void()>* serve);
void add_scan(CLI::App& app, int* exit_code);
void add_status(CLI::App& app, int* exit_code);
void add_machine_info(CLI::App& app, int* exit_code);
void add_set_healthy(CLI::App& app, int* exit_code);
// npd_check_cmd.cpp: node-problem-detector's custom-plugin protocol (exit 0/1/2, one line).
void add_npd_check(CLI::App& app, int* exit_code);
// slurm_health_check_cmd.cpp: Slurm's HealthCheckProgram (drain and resume this node).
void add_slurm_health_check(CLI::App& app, int* exit_code);
void add_trigger_check(CLI::App& app, int* exit_code);
void add_compact(CLI::App& app, int* exit_code);
// plugins_cmd.cpp: custom-plugins, list-plugins, run-plugin-group, deregister-component.
void add_plugin_verbs(CLI::App& app, int* exit_code);
// `gpud version`, and the --version flag of gpud itself.
void add_version(CLI::App& app, int* exit_code);
std::string version_text();  // "gpud <version> (<git revision>)"
void add_inject_fault(CLI::App& app, int* exit_code);
// service.cpp: install / remove the systemd service.
void add_up(CLI::App& app, int* exit_code);
void add_down(CLI::App& app, int* exit_code);
// control_plane_verbs.cpp: GPUd's login, notify, update and release, answered kExitNoControlPlane.
void add_control_plane_verbs(CLI::App& app, int* exit_code);
// metadata_cmd.cpp: the state database's key/values and reboot history; --set-key/--set-value.
void add_metadata(CLI::App& app, int* exit_code);
// import_gpud_state_cmd.cpp: GPUd's state file (events, reboots, machine id) into gpud's store.
void add_import_gpud_state(CLI::App& app, int* exit_code);

// cri_helper_cmd.cpp: hidden; the daemon's child for one CRI call (runtimes::call_cri_helper).
void add_cri_helper(CLI::App& app, int* exit_code);
// tls_material_cmd.cpp: hidden; the daemon's child that resolves its TLS material
// (server::resolve_tls_material_in_helper).
void add_tls_material(CLI::App& app, int* exit_code);

// Exit codes shared by the verbs.
inline constexpr int kExitOk = 0;
inline constexpr int kExitUnhealthy =
    1;  // scan/status found something not Healthy, or the daemon failed
inline constexpr int kExitUsage = 2;  // usage or runtime error
// GPUd's control-plane verbs (login, notify, update, release): gpud has no managed control plane.
inline constexpr int kExitNoControlPlane = 3;

}  // namespace gpud::app
