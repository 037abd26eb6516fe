// `gpud trigger-check`: asks the local daemon to run components' checks now and prints their fresh
// states (GET /v1/components/trigger-check).
#include <httplib.h>

#include <iostream>
#include <memory>

#include "app/api_replies.h"
#include "app/client.h"
#include "app/options.h"
#include "app/report.h"
#include "app/verbs.h"

namespace gpud::app {

void add_trigger_check(CLI::App& app, int* exit_code) {
  auto options = std::make_shared<ClientOptions>();
  auto token_file = std::make_shared<std::string>();
  auto component = std::make_shared<std::string>();
  auto tag = std::make_shared<std::string>();
  auto* cmd = app.add_subcommand(
      "trigger-check",
      "Run a component's check (or every check of a tag) now and print the result");
  cmd->add_option("component", *component, "The component to check");
  cmd->add_option("--tag", *tag, "Check every component carrying this tag instead");
  // A custom plugin's check runs only for root, the Unix socket or the admin token.
  add_admin_client_flags(*cmd, *options, *token_file);
  cmd->callback([options, token_file, component, tag, exit_code] {
    auto fail = [exit_code](int code, const std::string& message) {
      std::cerr << "✘ " << message << "\n";
      *exit_code = code;
    };
    if (component->empty() == tag->empty())
      return fail(kExitUsage, "name one component, or a --tag");
    auto client = admin_client(*options, *token_file);
    if (!client) return fail(kExitUsage, client.error().message);
    auto r =
        answered(client->get_when_finished(
                     "/v1/components/trigger-check?" +
                         (component->empty()
                              ? "tagName=" + httplib::detail::encode_query_param(*tag)
                              : "componentName=" + httplib::detail::encode_query_param(*component)),
                     kTriggerPollInterval),
                 "trigger-check");
    if (!r) return fail(kExitUsage, r.error().message);
    auto doc = parse_states_reply(r->body);
    if (!doc) return fail(kExitUsage, client->endpoint().describe() + ": " + doc.error().message);
    std::cout << states_text(*doc);
    *exit_code = all_healthy(*doc) ? kExitOk : kExitUnhealthy;
  });
}

}  // namespace gpud::app
