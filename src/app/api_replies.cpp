#include "app/api_replies.h"

#include "core/health.h"

namespace gpud::app {
namespace {

using nlohmann::json;

Error unexpected(const std::string& what, const std::string& why) {
  return make_error("the daemon's " + what + " answer is not what gpud serves: " + why);
}

// The string at `key`, or an error naming where it should have been.
Result<std::string> string_field(const json& object, const char* key, const std::string& where) {
  auto it = object.find(key);
  if (it == object.end()) return make_error(where + " has no \"" + key + "\"");
  if (!it->is_string()) return make_error(where + "'s \"" + key + "\" is not a string");
  return it->get<std::string>();
}

Result<json> parse_json(const std::string& body) {
  json doc = json::parse(body, nullptr, false);
  if (doc.is_discarded()) return make_error("not JSON");
  return doc;
}

}  // namespace

Result<void> check_healthz_reply(const std::string& body) {
  auto doc = parse_json(body);
  if (!doc) return unexpected("/healthz", doc.error().message);
  if (!doc->is_object()) return unexpected("/healthz", "not an object");
  auto status = string_field(*doc, "status", "the object");
  if (!status) return unexpected("/healthz", status.error().message);
  if (*status != "ok") return unexpected("/healthz", "status is \"" + *status + "\", not \"ok\"");
  return {};
}

Result<json> parse_states_reply(const std::string& body) {
  const std::string what = "/v1/states";
  auto doc = parse_json(body);
  if (!doc) return unexpected(what, doc.error().message);
  if (!doc->is_array()) return unexpected(what, "not an array");
  for (size_t i = 0; i < doc->size(); ++i) {
    const json& c = (*doc)[i];
    std::string where = "entry " + std::to_string(i);
    if (!c.is_object()) return unexpected(what, where + " is not an object");
    auto name = string_field(c, "component", where);
    if (!name) return unexpected(what, name.error().message);
    where = "component " + *name;
    auto states = c.find("states");
    if (states == c.end() || !states->is_array())
      return unexpected(what, where + " has no \"states\" array");
    for (const json& s : *states) {
      if (!s.is_object()) return unexpected(what, where + " has a state that is not an object");
      auto health = string_field(s, "health", "a state of " + where);
      if (!health) return unexpected(what, health.error().message);
      if (!parse_health(*health))
        return unexpected(what,
                          "a state of " + where + " has the unknown health \"" + *health + "\"");
      if (auto r = s.find("reason"); r != s.end() && !r->is_string())
        return unexpected(what, "a state of " + where + " has a \"reason\" that is not a string");
    }
  }
  return doc;
}

bool all_healthy(const json& states) {
  for (const json& c : states)
    for (const json& s : c.at("states"))
      if (s.at("health").get<std::string>() != to_string(Health::kHealthy)) return false;
  return true;
}

Result<SetHealthyReply> parse_set_healthy_reply(const std::string& body) {
  const std::string what = "set-healthy";
  auto doc = parse_json(body);
  if (!doc) return unexpected(what, doc.error().message);
  if (!doc->is_object()) return unexpected(what, "not an object");
  SetHealthyReply out;
  auto message = string_field(*doc, "message", "the object");
  if (!message) return unexpected(what, message.error().message);
  out.message = *message;
  auto ok = doc->find("successful");
  if (ok == doc->end() || !ok->is_array())
    return unexpected(what, "\"successful\" is not an array");
  for (const json& n : *ok) {
    if (!n.is_string()) return unexpected(what, "\"successful\" holds something not a string");
    out.successful.push_back(n.get<std::string>());
  }
  auto failed = doc->find("failed");
  if (failed == doc->end() || !failed->is_object())
    return unexpected(what, "\"failed\" is not an object");
  for (const auto& [name, reason] : failed->items()) {
    if (!reason.is_string())
      return unexpected(what, "the reason for \"" + name + "\" in \"failed\" is not a string");
    out.failed.emplace_back(name, reason.get<std::string>());
  }
  return out;
}

std::string error_message(int status, const std::string& body) {
  json doc = json::parse(body, nullptr, false);
  if (doc.is_object())
    if (auto m = doc.find("message"); m != doc.end() && m->is_string())
      return m->get<std::string>();
  constexpr size_t kShown = 200;
  return "HTTP " + std::to_string(status) +
         (body.empty() ? "" : ": " + body.substr(0, kShown) + (body.size() > kShown ? "…" : ""));
}

}  // namespace gpud::app
