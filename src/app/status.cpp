// `gpud status`: the systemd service's state, then the health the local daemon reports over its
// API.
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "app/api_replies.h"
#include "app/client.h"
#include "app/options.h"
#include "app/report.h"
#include "app/service.h"
#include "app/verbs.h"

namespace gpud::app {

void add_status(CLI::App& app, int* exit_code) {
  auto options = std::make_shared<ClientOptions>();
  auto json = std::make_shared<bool>(false);
  auto* cmd = app.add_subcommand(
      "status", "Show the gpud service state and the health the local daemon reports");
  cmd->alias("st");
  add_client_flags(*cmd, *options);
  cmd->add_flag("--json", *json,
                "Print {\"service\":{...},\"states\":<the daemon's /v1/states document>}");
  cmd->callback([options, json, exit_code] {
    ServiceState service = service_state();
    if (!*json) std::cout << "service: " << kServiceName << " " << service.summary << "\n";
    auto fail = [exit_code](int code, const std::string& message) {
      std::cerr << "✘ " << message << "\n";
      *exit_code = code;
    };
    auto endpoint = resolve_endpoint(*options);
    if (!endpoint) return fail(kExitUsage, endpoint.error().message);
    ApiClient client(*endpoint, "");
    const std::string where = endpoint->describe();

    auto health = client.get("/healthz");
    if (!health && health.error().code == kNoDaemon)
      return fail(kExitUnhealthy, "gpud is not running: " + health.error().message);
    if (!health) return fail(kExitUsage, health.error().message);
    if (health->status != 200)
      return fail(kExitUsage,
                  where + " answered /healthz with " + error_message(health->status, health->body));
    if (auto r = check_healthz_reply(health->body); !r)
      return fail(kExitUsage, where + ": " + r.error().message);

    auto states = client.get("/v1/states");
    if (!states) return fail(kExitUsage, "cannot read states: " + states.error().message);
    if (states->status != 200)
      return fail(kExitUsage, "cannot read states: " + error_message(states->status, states->body));
    auto doc = parse_states_reply(states->body);
    if (!doc) return fail(kExitUsage, where + ": " + doc.error().message);

    if (*json) {
      nlohmann::json out{{"service",
                          {{"name", kServiceName},
                           {"state", service.summary},
                           {"active", service.active},
                           {"enabled", service.enabled},
                           {"unit_file", service.unit}}},
                         {"states", *doc}};
      std::cout << out.dump(2) << "\n";
    } else {
      std::cout << "✔ gpud is running at " << where << "\n" << states_text(*doc);
    }
    *exit_code = all_healthy(*doc) ? kExitOk : kExitUnhealthy;
  });
}

}  // namespace gpud::app
