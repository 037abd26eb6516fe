// `gpud slurm-health-check`: drains or resumes this Slurm node from the daemon's current states.
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <memory>

#include "app/slurm_health_check.h"
#include "app/verbs.h"
#include "core/strings.h"
#include "host/command.h"

namespace gpud::app {
namespace {

// slurmd waits for its HealthCheckProgram (and runs it on every node at once): the daemon's answer
// comes within seconds or the node is left as it is; each scontrol call gets its own deadline.
constexpr std::chrono::milliseconds kDaemonBudget{5000};
constexpr std::chrono::milliseconds kScontrolTimeout{15000};

struct SlurmOptions {
  std::string node_name;
  std::string scontrol = "scontrol";
  std::string components = "all";
  bool dry_run = false;
};

std::string search_path() {
  const char* p = std::getenv("PATH");
  return p != nullptr && *p != '\0' ? std::string(p) : std::string(host::kDefaultSearchPath);
}

// --node-name, else SLURMD_NODENAME (slurmd sets it for its HealthCheckProgram), else the host
// name up to its first dot (Slurm's default NodeName).
std::string node_name_of(const SlurmOptions& o) {
  if (!o.node_name.empty()) return o.node_name;
  if (const char* env = std::getenv("SLURMD_NODENAME"); env != nullptr && *env != '\0') return env;
  std::array<char, 256> host{};
  if (gethostname(host.data(), host.size() - 1) != 0) return "";
  std::string name(host.data());
  return name.substr(0, name.find('.'));
}

Result<std::string> scontrol(const SlurmOptions& o, const std::vector<std::string>& args) {
  std::vector<std::string> argv{o.scontrol};
  argv.insert(argv.end(), args.begin(), args.end());
  auto out = host::run_command(argv, search_path(), kScontrolTimeout);
  if (!out) return out.error();
  if (out->exit_code != 0) {
    std::string why(trim(out->err.empty() ? out->out : out->err));
    return make_error("`scontrol " + args.front() + " " + args[1] + " ...` exited " +
                      std::to_string(out->exit_code) + (why.empty() ? "" : ": " + why));
  }
  return out->out;
}

int run(const ClientOptions& client, const SlurmOptions& o) {
  const std::string name = node_name_of(o);
  if (name.empty()) {
    std::cerr << "gpud slurm-health-check: no node name (give --node-name or SLURMD_NODENAME)\n";
    return 2;
  }
  auto selection = parse_npd_selection(o.components);
  if (!selection) {
    std::cerr << "gpud slurm-health-check: " << selection.error().message << "\n";
    return 2;
  }
  auto shown = scontrol(o, {"show", "node", name});
  if (!shown) {
    std::cerr << "gpud slurm-health-check: node " << name
              << " left as it is: cannot read its state: " << shown.error().message << "\n";
    return 2;
  }
  auto node = parse_scontrol_node(*shown);
  if (!node) {
    std::cerr << "gpud slurm-health-check: node " << name
              << " left as it is: " << node.error().message << "\n";
    return 2;
  }
  node->name = name;
  const SlurmDecision d = slurm_decision(daemon_npd_answer(client, *selection, kDaemonBudget), *node);
  std::vector<std::string> update;
  if (d.action == SlurmAction::kDrain)
    update = {"update", "NodeName=" + name, "State=DRAIN", "Reason=" + d.reason};
  else if (d.action == SlurmAction::kResume)
    update = {"update", "NodeName=" + name, "State=RESUME"};
  if (!update.empty() && !o.dry_run) {
    if (auto r = scontrol(o, update); !r) {
      std::cerr << "gpud slurm-health-check: " << d.message << ": failed: " << r.error().message
                << "\n";
      return 2;
    }
  }
  std::cout << "gpud slurm-health-check: " << (o.dry_run && !update.empty() ? "(dry run) " : "")
            << d.message << "\n";
  return d.exit_code;
}

}  // namespace

void add_slurm_health_check(CLI::App& app, int* exit_code) {
  auto client = std::make_shared<ClientOptions>();
  auto options = std::make_shared<SlurmOptions>();
  auto* cmd = app.add_subcommand(
      "slurm-health-check",
      "Slurm HealthCheckProgram: drain this node when the daemon reports a fault (reason \"gpud: "
      "...\"), resume it when the daemon reports it healthy again if gpud drained it; another "
      "drain reason is never changed, and a daemon that does not answer changes nothing. Exit 0 "
      "healthy, 1 fault, 2 unknown");
  add_client_flags(*cmd, *client);
  cmd->add_option("--node-name", options->node_name,
                  "The node's Slurm name (default: $SLURMD_NODENAME, else the short host name)");
  cmd->add_option("--scontrol", options->scontrol, "The scontrol program to run")
      ->capture_default_str();
  cmd->add_option("--components", options->components,
                  "What drains the node: gpu, kernel, runtime, all, or a comma-separated list of "
                  "presets and component names")
      ->capture_default_str();
  cmd->add_flag("--dry-run", options->dry_run, "Say what would be done; change nothing");
  cmd->callback([client, options, exit_code] { *exit_code = run(*client, *options); });
}

}  // namespace gpud::app
