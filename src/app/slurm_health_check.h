// `gpud slurm-health-check`: Slurm's HealthCheckProgram over the daemon's current states. slurmd
// runs it as root on every node each HealthCheckInterval, with no arguments and the node's Slurm
// name in SLURMD_NODENAME. A fault the daemon reports drains the node with a reason that starts
// with "gpud: " and names the GPU; once the daemon reports the node healthy, a node that gpud
// drained is resumed. A drain with any other reason is the administrator's (or another checker's)
// and is never changed; a daemon that does not answer leaves the node as it is.
#pragma once

#include <string>
#include <string_view>

#include "app/npd_check.h"
#include "core/result.h"

namespace gpud::app {

// Every drain reason gpud writes starts so; a drained node's reason without it is someone else's.
inline constexpr std::string_view kSlurmReasonPrefix = "gpud: ";

// A node as `scontrol show node NAME` prints it.
struct SlurmNode {
  std::string name;
  std::string state;   // "IDLE+DRAIN", "MIXED", "DOWN+DRAIN+NOT_RESPONDING", ...
  std::string reason;  // without the "[user@time]" Slurm appends; "" when none
  bool drained() const;  // DRAIN among the state's flags (draining or drained)
  bool drained_by_gpud() const;
};

// Parses `scontrol show node NAME` output (one node, the multi-line form). An answer without the
// node's State= is an error quoting the answer's start.
[[nodiscard]] Result<SlurmNode> parse_scontrol_node(std::string_view text);

enum class SlurmAction { kNone, kDrain, kResume };

struct SlurmDecision {
  SlurmAction action = SlurmAction::kNone;
  std::string reason;   // the drain reason, for kDrain
  std::string message;  // one line for slurmd's log: what was seen and what is done
  int exit_code = 0;    // 0 healthy (or resumed), 1 a fault (drained or left drained), 2 unknown
};

// What to do with `node` given the daemon's answer (npd_answer over all components, or the
// selection asked for): kNpdProblem drains, unless the node is drained for a reason that is not
// gpud's or already for this one; kNpdOk resumes a node that gpud drained; kNpdUnknown (no daemon,
// still initializing) does nothing.
SlurmDecision slurm_decision(const NpdAnswer& answer, const SlurmNode& node);

}  // namespace gpud::app
