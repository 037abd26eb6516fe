// `gpud status`: the systemd service's state, then the health the local daemon reports over its
// API.
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "app/client.h"
#include "app/options.h"
#include "app/report.h"
#include "app/service.h"
#include "app/verbs.h"

namespace gpud::app {

void add_status(CLI::App& app, int* exit_code) {
  auto server = std::make_shared<std::string>(kDefaultServer);
  auto json = std::make_shared<bool>(false);
  auto* cmd = app.add_subcommand(
      "status", "Show the gpud service state and the health the local daemon reports");
  cmd->alias("st");
  cmd->add_option("--server", *server, "The daemon's address")->capture_default_str();
  cmd->add_flag("--json", *json,
                "Print {\"service\":{...},\"states\":<the daemon's /v1/states document>}");
  cmd->callback([server, json, exit_code] {
    ServiceState service = service_state();
    if (!*json) std::cout << "service: " << kServiceName << " " << service.summary << "\n";
    ApiClient client(*server);
    auto health = client.get("/healthz");
    if (!health || health->status != 200) {
      std::cerr << "✘ gpud is not running: "
                << (health ? "healthz answered " + std::to_string(health->status)
                           : health.error().message)
                << "\n";
      *exit_code = kExitUnhealthy;
      return;
    }
    auto states = client.get("/v1/states");
    if (!states || states->status != 200) {
      std::cerr << "✘ cannot read states: " << (states ? states->body : states.error().message)
                << "\n";
      *exit_code = kExitUsage;
      return;
    }
    auto doc = nlohmann::json::parse(states->body, nullptr, false);
    if (doc.is_discarded() || !doc.is_array()) {
      std::cerr << "✘ the daemon answered something that is not a states list\n";
      *exit_code = kExitUsage;
      return;
    }
    bool healthy = true;
    for (const auto& c : doc)
      for (const auto& s : c.value("states", nlohmann::json::array()))
        if (s.value("health", "") != "Healthy") healthy = false;
    if (*json) {
      nlohmann::json out{{"service",
                          {{"name", kServiceName},
                           {"state", service.summary},
                           {"active", service.active},
                           {"enabled", service.enabled},
                           {"unit_file", service.unit}}},
                         {"states", doc}};
      std::cout << out.dump(2) << "\n";
    } else {
      std::cout << "✔ gpud is running at " << *server << "\n" << states_text(doc);
    }
    *exit_code = healthy ? kExitOk : kExitUnhealthy;
  });
}

}  // namespace gpud::app
