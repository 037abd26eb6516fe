#include "app/slurm_health_check.h"

#include <fmt/format.h>

#include "core/strings.h"

namespace gpud::app {
namespace {

// The value of `key=` in a line of `scontrol show node`: up to the next space, or the line's end
// for Reason (the last field of its line, and free text).
std::string_view field(std::string_view line, std::string_view key, bool to_line_end) {
  for (size_t at = 0; (at = line.find(key, at)) != std::string_view::npos; at += key.size()) {
    if (at > 0 && line[at - 1] != ' ') continue;
    std::string_view v = line.substr(at + key.size());
    return to_line_end ? v : v.substr(0, v.find(' '));
  }
  return {};
}

// Slurm appends " [user@2026-12-06T22:48:01]" to a reason when it shows it.
std::string_view without_stamp(std::string_view reason) {
  reason = trim(reason);
  if (!reason.empty() && reason.back() == ']') {
    const size_t open = reason.rfind(" [");
    if (open != std::string_view::npos &&
        reason.substr(open).find('@') != std::string_view::npos)
      reason = trim(reason.substr(0, open));
  }
  return reason;
}

}  // namespace

bool SlurmNode::drained() const {
  for (std::string_view rest = state; !rest.empty();) {
    const size_t plus = rest.find('+');
    if (rest.substr(0, plus) == "DRAIN") return true;
    rest = plus == std::string_view::npos ? std::string_view() : rest.substr(plus + 1);
  }
  return false;
}

bool SlurmNode::drained_by_gpud() const {
  return drained() && std::string_view(reason).substr(0, kSlurmReasonPrefix.size()) ==
                          kSlurmReasonPrefix;
}

Result<SlurmNode> parse_scontrol_node(std::string_view text) {
  SlurmNode node;
  bool has_state = false;
  for (std::string_view rest = text; !rest.empty();) {
    const size_t nl = rest.find('\n');
    const std::string_view line = trim(rest.substr(0, nl));
    rest = nl == std::string_view::npos ? std::string_view() : rest.substr(nl + 1);
    if (auto v = field(line, "NodeName=", false); !v.empty() && node.name.empty())
      node.name = std::string(v);
    if (line.substr(0, 6) == "State=") {
      node.state = std::string(field(line, "State=", false));
      has_state = !node.state.empty();
    }
    if (line.substr(0, 7) == "Reason=") node.reason = std::string(without_stamp(line.substr(7)));
  }
  if (!has_state)
    return make_error("scontrol answered without the node's State=: \"" +
                      std::string(utf8_prefix(trim(text), 120)) + "\"");
  return node;
}

SlurmDecision slurm_decision(const NpdAnswer& answer, const SlurmNode& node) {
  SlurmDecision d;
  const std::string& name = node.name;
  if (answer.exit_code == kNpdUnknown) {
    d.exit_code = 2;
    d.message = fmt::format("node {} left as it is ({}): {}", name,
                            node.drained() ? "drained: " + node.reason : node.state, answer.line);
    return d;
  }
  if (answer.exit_code == kNpdProblem) {
    d.exit_code = 1;
    const std::string reason = std::string(kSlurmReasonPrefix) + answer.line;
    if (node.drained() && !node.drained_by_gpud()) {
      d.message = fmt::format("{}; node {} is already drained for \"{}\", which is not gpud's: left "
                              "as it is",
                              answer.line, name, node.reason);
    } else if (node.drained_by_gpud() && node.reason == reason) {
      d.message = fmt::format("node {} stays drained: {}", name, answer.line);
    } else {
      d.action = SlurmAction::kDrain;
      d.reason = reason;
      d.message = fmt::format("draining node {}: {}", name, answer.line);
    }
    return d;
  }
  if (node.drained_by_gpud()) {
    d.action = SlurmAction::kResume;
    d.message = fmt::format("resuming node {} (gpud had drained it for \"{}\"): {}", name,
                            node.reason, answer.line);
  } else if (node.drained()) {
    d.message = fmt::format("{}; node {} stays drained for \"{}\", which is not gpud's", answer.line,
                            name, node.reason);
  } else {
    d.message = fmt::format("node {}: {}", name, answer.line);
  }
  return d;
}

}  // namespace gpud::app
