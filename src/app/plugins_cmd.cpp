// The custom-plugin verbs: `gpud custom-plugins [--run] FILE` (validate and run specs here),
// `gpud list-plugins` (GET /v1/plugins), `gpud run-plugin-group TAG` (GET
// /v1/components/trigger-tag) and `gpud deregister-component NAME` (DELETE /v1/components).
#include <httplib.h>

#include <cstdlib>
#include <iomanip>
#include <iostream>
#include <memory>
#include <sstream>

#include "app/api_replies.h"
#include "app/client.h"
#include "app/options.h"
#include "app/report.h"
#include "app/verbs.h"
#include "core/json.h"
#include "core/time_util.h"
#include "plugins/plugin_component.h"
#include "plugins/spec.h"

namespace gpud::app {
namespace {

std::string seconds_text(std::chrono::milliseconds d) {
  return format_duration(std::chrono::duration_cast<std::chrono::seconds>(d));
}

std::string specs_table(const std::vector<plugins::Spec>& specs) {
  std::ostringstream out;
  out << std::left << std::setw(32) << "COMPONENT" << std::setw(11) << "TYPE" << std::setw(10)
      << "RUN MODE" << std::setw(10) << "TIMEOUT" << std::setw(10) << "INTERVAL"
      << "TAGS\n";
  for (const plugins::Spec& s : specs) {
    std::string tags;
    for (const auto& t : s.tags) tags += (tags.empty() ? "" : ",") + t;
    out << std::left << std::setw(32) << s.component_name << std::setw(11)
        << plugins::to_string(s.type) << std::setw(10) << s.run_mode << std::setw(10)
        << seconds_text(s.timeout) << std::setw(10)
        << (s.interval.count() == 0 ? "-" : seconds_text(s.interval)) << tags << "\n";
  }
  return out.str();
}

std::string indented(const std::string& text, std::string_view prefix) {
  std::string out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) out += std::string(prefix) + line + "\n";
  return out;
}

// One plugin's result as `custom-plugins --run` prints it.
std::string run_text(const CheckResult& r) {
  std::ostringstream out;
  for (const HealthState& s : r.states) {
    out << (s.health == Health::kHealthy ? "✔ " : "✘ ") << s.component << ": "
        << to_string(s.health) << ": " << s.reason << "\n";
    out << "  run mode: " << s.run_mode << "\n";
    if (!s.error.empty()) out << "  error: " << s.error << "\n";
    for (const auto& [k, v] : wire_extra_info(s)) out << "  extra_info." << k << ": " << v << "\n";
    if (s.suggested_actions) {
      out << "  suggested actions:";
      for (RepairAction a : s.suggested_actions->repair_actions) out << " " << to_string(a);
      out << "\n";
    }
  }
  if (!r.detail.empty()) out << "  output:\n" << indented(r.detail, "    | ");
  return out.str();
}

void add_custom_plugins(CLI::App& app, int* exit_code) {
  auto file = std::make_shared<std::string>();
  auto run = std::make_shared<bool>(false);
  auto fail_fast = std::make_shared<bool>(true);
  auto* cmd = app.add_subcommand("custom-plugins",
                                 "Validate a custom plugin specs file (and with --run, run each "
                                 "plugin here once and print its result)");
  cmd->alias("cs");
  cmd->alias("plugin");
  cmd->alias("plugins");
  cmd->add_option("file", *file, "The specs file (YAML, docs/PLUGINS.md)")->required();
  cmd->add_flag("--run,-r", *run, "Run every plugin once (init plugins first, in file order)");
  cmd->add_option("--fail-fast,-f", *fail_fast, "With --run: stop at the first plugin not Healthy")
      ->default_str("true");
  cmd->callback([file, run, fail_fast, exit_code] {
    auto specs = plugins::load_specs_file(*file, false);
    if (!specs) {
      std::cerr << "✘ " << specs.error().message << "\n";
      *exit_code = kExitUsage;
      return;
    }
    std::cout << specs_table(*specs);
    std::cout << "✔ " << specs->size() << " plugin spec" << (specs->size() == 1 ? "" : "s")
              << " in " << *file << " valid\n";
    *exit_code = kExitOk;
    if (!*run) return;
    plugins::ScriptOptions script;
    if (const char* p = std::getenv("PATH"); p != nullptr) script.path = p;
    ComponentContext ctx;  // no store, no metrics: a run here records nothing
    std::vector<const plugins::Spec*> order;
    for (const auto& s : *specs)
      if (s.type == plugins::PluginType::kInit) order.push_back(&s);
    for (const auto& s : *specs)
      if (s.type != plugins::PluginType::kInit) order.push_back(&s);
    for (const plugins::Spec* s : order) {
      std::cout << "⌛ running " << s->component_name << " (" << plugins::to_string(s->type) << ")\n"
                << std::flush;
      plugins::PluginComponent component(ctx, *s, script);
      CheckResult r = component.check();
      std::cout << run_text(r) << std::flush;
      if (r.health() != Health::kHealthy) {
        *exit_code = kExitUnhealthy;
        if (*fail_fast) {
          std::cerr << "✘ stopped at " << s->component_name << " (--fail-fast)\n";
          return;
        }
      }
    }
  });
}

void add_list_plugins(CLI::App& app, int* exit_code) {
  auto options = std::make_shared<ClientOptions>();
  auto* cmd = app.add_subcommand("list-plugins", "List the daemon's custom plugins");
  cmd->alias("lp");
  add_client_flags(*cmd, *options);
  cmd->callback([options, exit_code] {
    auto fail = [exit_code](int code, const std::string& message) {
      std::cerr << "✘ " << message << "\n";
      *exit_code = code;
    };
    auto endpoint = resolve_endpoint(*options);
    if (!endpoint) return fail(kExitUsage, endpoint.error().message);
    auto r = answered(ApiClient(*endpoint, "").get("/v1/plugins"), "list-plugins");
    if (!r) return fail(kExitUsage, r.error().message);
    auto doc = nlohmann::json::parse(r->body, nullptr, false);
    if (!doc.is_array()) return fail(kExitUsage, endpoint->describe() + ": not a list of plugins");
    auto text = [](const nlohmann::json& o, const char* key) {
      auto it = o.find(key);
      return it != o.end() && it->is_string() ? it->get<std::string>() : std::string("?");
    };
    if (doc.empty()) std::cout << "no custom plugins registered\n";
    for (const auto& p : doc) {
      if (!p.is_object()) return fail(kExitUsage, endpoint->describe() + ": not a plugin spec");
      std::cout << "- " << text(p, "component_name") << " (Type: " << text(p, "plugin_type")
                << ", Run Mode: " << text(p, "run_mode") << ")\n";
    }
    *exit_code = kExitOk;
  });
}

void add_run_plugin_group(CLI::App& app, int* exit_code) {
  auto options = std::make_shared<ClientOptions>();
  auto token_file = std::make_shared<std::string>();
  auto tag = std::make_shared<std::string>();
  auto* cmd = app.add_subcommand(
      "run-plugin-group", "Run every component (custom plugins included) carrying a tag now");
  cmd->add_option("tag", *tag, "The tag")->required();
  // Custom plugins run only for root, the Unix socket or the admin token.
  add_admin_client_flags(*cmd, *options, *token_file);
  cmd->callback([options, token_file, tag, exit_code] {
    auto fail = [exit_code](int code, const std::string& message) {
      std::cerr << "✘ " << message << "\n";
      *exit_code = code;
    };
    auto made = admin_client(*options, *token_file);
    if (!made) return fail(kExitUsage, made.error().message);
    const ApiClient& client = *made;
    auto r = answered(client.get_when_finished("/v1/components/trigger-tag?tagName=" +
                                                   httplib::detail::encode_query_param(*tag),
                                               kTriggerPollInterval),
                      "run-plugin-group");
    if (!r) return fail(kExitUsage, r.error().message);
    auto doc = nlohmann::json::parse(r->body, nullptr, false);
    if (!doc.is_object() || !doc.contains("components") || !doc["components"].is_array() ||
        !doc.contains("success") || !doc["success"].is_boolean())
      return fail(kExitUsage, client.endpoint().describe() + ": not a trigger-tag answer");
    std::string names;
    for (const auto& n : doc["components"])
      if (n.is_string()) names += (names.empty() ? "" : ",") + n.get<std::string>();
    // The states the run left, from the cache (the trigger just filled it).
    auto states = client.get("/v1/states?components=" + httplib::detail::encode_query_param(names));
    if (states && states->status == 200)
      if (auto parsed = parse_states_reply(states->body); parsed) std::cout << states_text(*parsed);
    const bool success = doc["success"].get<bool>();
    std::cout << (success ? "✔ " : "✘ ") << "tag " << *tag << ": " << doc["components"].size()
              << " component(s) ran, " << (success ? "all Healthy" : "not all Healthy") << "\n";
    *exit_code = success ? kExitOk : kExitUnhealthy;
  });
}

void add_deregister_component(CLI::App& app, int* exit_code) {
  auto options = std::make_shared<ClientOptions>();
  auto token_file = std::make_shared<std::string>();
  auto name = std::make_shared<std::string>();
  auto* cmd = app.add_subcommand(
      "deregister-component",
      "Stop and remove a custom plugin component from the running daemon (until it restarts)");
  cmd->add_option("component", *name, "The plugin's component name")->required();
  add_admin_client_flags(*cmd, *options, *token_file);
  cmd->callback([options, token_file, name, exit_code] {
    auto fail = [exit_code](int code, const std::string& message) {
      std::cerr << "✘ " << message << "\n";
      *exit_code = code;
    };
    auto client = admin_client(*options, *token_file);
    if (!client) return fail(kExitUsage, client.error().message);
    auto r = answered(
        client->del("/v1/components?componentName=" + httplib::detail::encode_query_param(*name)),
        "deregister");
    if (!r) return fail(kExitUsage, r.error().message);
    std::cout << "✔ component " << *name << " deregistered\n";
    *exit_code = kExitOk;
  });
}

}  // namespace

void add_plugin_verbs(CLI::App& app, int* exit_code) {
  add_custom_plugins(app, exit_code);
  add_list_plugins(app, exit_code);
  add_run_plugin_group(app, exit_code);
  add_deregister_component(app, exit_code);
}

}  // namespace gpud::app
