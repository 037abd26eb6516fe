// `gpud set-healthy`: asks the local daemon to acknowledge components' past failures (kept as
// resolved; not faults again after a restart).
#include <cstdlib>
#include <iostream>
#include <memory>

#include "app/api_replies.h"
#include "app/client.h"
#include "app/options.h"
#include "app/verbs.h"

namespace gpud::app {

void add_set_healthy(CLI::App& app, int* exit_code) {
  auto options = std::make_shared<ClientOptions>();
  auto token_file = std::make_shared<std::string>();
  auto comps = std::make_shared<std::vector<std::string>>();
  auto* cmd = app.add_subcommand(
      "set-healthy",
      "Acknowledge the past failures of components (all that support it by default); kept across "
      "restarts");
  cmd->alias("set-health");
  cmd->add_option("components", *comps, "Components, comma- or space-separated")->delimiter(',');
  add_admin_client_flags(*cmd, *options, *token_file);
  cmd->callback([options, token_file, comps, exit_code] {
    auto fail = [exit_code](int code, const std::string& message) {
      std::cerr << "✘ " << message << "\n";
      *exit_code = code;
    };
    auto client = admin_client(*options, *token_file);
    if (!client) return fail(kExitUsage, client.error().message);
    std::string list;
    for (const auto& c : *comps) list += (list.empty() ? "" : ",") + c;
    // 200, 400 (every component failed) and 404 (unknown component) share one body shape.
    auto r = answered(client->post("/v1/health-states/set-healthy" +
                                   (list.empty() ? std::string() : "?components=" + list)),
                      "set-healthy", {200, 400, 404});
    if (!r) return fail(kExitUsage, r.error().message);
    auto reply = parse_set_healthy_reply(r->body);
    if (!reply)
      return fail(kExitUsage, client->endpoint().describe() + ": " + reply.error().message);
    if (r->status == 404) return fail(kExitUsage, reply->message);
    if (r->status == 200) {
      std::string ok;
      for (const auto& n : reply->successful) ok += (ok.empty() ? "" : ", ") + n;
      std::cout << "✔ successfully set components to healthy: " << (ok.empty() ? "(none)" : ok)
                << "\n";
      *exit_code = kExitOk;
    } else {
      std::cerr << "✘ set-healthy failed: " << reply->message << "\n";
    }
    for (const auto& [name, reason] : reply->failed)
      std::cerr << "✘ " << name << ": " << reason << "\n";
    if (r->status != 200 || !reply->failed.empty()) *exit_code = kExitUnhealthy;
  });
}

}  // namespace gpud::app
