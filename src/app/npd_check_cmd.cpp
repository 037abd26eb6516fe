// `gpud npd-check`: one node-problem-detector condition from the daemon's current states.
#include <chrono>
#include <iostream>
#include <memory>

#include "app/api_replies.h"
#include "app/client.h"
#include "app/npd_check.h"
#include "app/verbs.h"

namespace gpud::app {
namespace {

// NPD's default plugin timeout is 5 s; the answer comes well within a second or is Unknown.
constexpr std::chrono::milliseconds kNpdCheckBudget{800};

}  // namespace

NpdAnswer daemon_npd_answer(const ClientOptions& options, const NpdSelection& selection,
                            std::chrono::milliseconds budget) {
  auto unknown = [](const std::string& why) { return NpdAnswer{kNpdUnknown, npd_line(why)}; };
  auto endpoint = resolve_endpoint(options);
  if (!endpoint) return unknown("gpud unknown: " + endpoint.error().message);
  ApiClient client(*endpoint, "");
  client.set_deadline(std::chrono::steady_clock::now() + budget);
  auto states = client.get("/v1/states");
  if (!states && states.error().code == kNoDaemon)
    return unknown("gpud not reachable: " + states.error().message);
  if (!states) return unknown("gpud unknown: " + states.error().message);
  if (states->status != 200)
    return unknown("gpud unknown: /v1/states " + error_message(states->status, states->body));
  auto doc = parse_states_reply(states->body);
  if (!doc) return unknown("gpud unknown: " + doc.error().message);
  // Only to name a GPU: without it (no NVML, 501, time up) the component is named instead.
  nlohmann::json gpus;
  if (!all_healthy(*doc))
    if (auto g = client.get("/v1/gpus"); g && g->status == 200)
      gpus = nlohmann::json::parse(g->body, nullptr, false);
  return npd_answer(*doc, gpus, selection);
}

void add_npd_check(CLI::App& app, int* exit_code) {
  auto options = std::make_shared<ClientOptions>();
  auto components = std::make_shared<std::string>("all");
  auto* cmd = app.add_subcommand(
      "npd-check",
      "node-problem-detector custom plugin: exit 0 OK, 1 problem, 2 unknown; one line of at most "
      "80 bytes from the daemon's current states (never runs a check)");
  add_client_flags(*cmd, *options);
  cmd->add_option("--components", *components,
                  "What this condition covers: gpu, kernel, runtime, all, or a comma-separated "
                  "list of presets and component names")
      ->capture_default_str();
  cmd->callback([options, components, exit_code] {
    auto selection = parse_npd_selection(*components);
    NpdAnswer a = selection ? daemon_npd_answer(*options, *selection, kNpdCheckBudget)
                            : NpdAnswer{kNpdUnknown, npd_line(selection.error().message)};
    std::cout << a.line << "\n";
    *exit_code = a.exit_code;
  });
}

}  // namespace gpud::app
