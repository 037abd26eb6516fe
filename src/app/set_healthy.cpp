// `gpud set-healthy`: asks the local daemon to clear components' failure history.
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "app/client.h"
#include "app/verbs.h"

namespace gpud::app {

void add_set_healthy(CLI::App& app, int* exit_code) {
  auto server = std::make_shared<std::string>(kDefaultServer);
  auto comps = std::make_shared<std::vector<std::string>>();
  auto* cmd = app.add_subcommand(
      "set-healthy", "Clear the failure history of components (all that support it by default)");
  cmd->alias("set-health");
  cmd->add_option("components", *comps, "Components, comma- or space-separated")->delimiter(',');
  cmd->add_option("--server", *server, "The daemon's address")->capture_default_str();
  cmd->callback([server, comps, exit_code] {
    std::string list;
    for (const auto& c : *comps) list += (list.empty() ? "" : ",") + c;
    ApiClient client(*server);
    auto r = client.post("/v1/health-states/set-healthy" +
                         (list.empty() ? std::string() : "?components=" + list));
    if (!r) {
      std::cerr << "✘ " << r.error().message << "\n";
      *exit_code = kExitUsage;
      return;
    }
    auto doc = nlohmann::json::parse(r->body, nullptr, false);
    if (r->status != 200) {
      std::cerr << "✘ set-healthy failed (" << r->status
                << "): " << (doc.is_object() ? doc.value("message", r->body) : r->body) << "\n";
      if (doc.is_object() && doc.contains("failed"))
        for (auto& [k, v] : doc["failed"].items()) std::cerr << "  " << k << ": " << v << "\n";
      *exit_code = kExitUnhealthy;
      return;
    }
    std::string ok;
    for (const auto& n : doc.value("successful", nlohmann::json::array()))
      ok += (ok.empty() ? "" : ", ") + n.get<std::string>();
    std::cout << "✔ successfully set components to healthy: " << (ok.empty() ? "(none)" : ok)
              << "\n";
    if (doc.contains("failed") && !doc["failed"].empty()) {
      for (auto& [k, v] : doc["failed"].items()) std::cerr << "✘ " << k << ": " << v << "\n";
      *exit_code = kExitUnhealthy;
    }
  });
}

}  // namespace gpud::app
