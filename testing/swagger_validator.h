// A small Swagger 2.0 schema validator for tests: checks an API response against
// docs/gpud-api-swagger.json. Supports $ref (#/definitions/...), type, properties, items, allOf,
// enum and additionalProperties. Properties the schema does not name are allowed (gpud adds fields)
// unless additionalProperties is false.
#pragma once

#include <cmath>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace gpud::swagger {

namespace detail {

inline const nlohmann::json* resolve_ref(const nlohmann::json& spec, const std::string& ref,
                                         std::vector<std::string>& errors,
                                         const std::string& where) {
  constexpr std::string_view kPrefix = "#/definitions/";
  if (ref.rfind(kPrefix, 0) != 0) {
    errors.push_back(where + ": unsupported $ref " + ref);
    return nullptr;
  }
  std::string name = ref.substr(kPrefix.size());
  if (!spec.contains("definitions") || !spec["definitions"].contains(name)) {
    errors.push_back(where + ": unknown definition " + name);
    return nullptr;
  }
  return &spec["definitions"][name];
}

inline bool type_matches(const std::string& type, const nlohmann::json& v) {
  if (type == "object") return v.is_object();
  if (type == "array") return v.is_array();
  if (type == "string") return v.is_string();
  if (type == "boolean") return v.is_boolean();
  if (type == "number") return v.is_number();
  if (type == "integer") {
    if (v.is_number_integer()) return true;
    if (!v.is_number_float()) return false;
    double d = v.get<double>();
    return std::isfinite(d) && std::floor(d) == d;
  }
  if (type == "null") return v.is_null();
  return true;  // unknown type names do not constrain
}

inline void validate_at(const nlohmann::json& spec, const nlohmann::json& schema,
                        const nlohmann::json& value, const std::string& where,
                        std::vector<std::string>& errors, int depth) {
  if (depth > 64) {
    errors.push_back(where + ": schema nesting too deep");
    return;
  }
  if (!schema.is_object()) return;  // `true` and empty schemas accept anything
  if (schema.contains("$ref")) {
    const nlohmann::json* target =
        resolve_ref(spec, schema["$ref"].get<std::string>(), errors, where);
    if (target != nullptr) validate_at(spec, *target, value, where, errors, depth + 1);
  }
  if (schema.contains("allOf"))
    for (const auto& sub : schema["allOf"]) validate_at(spec, sub, value, where, errors, depth + 1);

  if (schema.contains("type")) {
    const auto& t = schema["type"];
    bool ok = !t.is_string() && !t.is_array();
    if (t.is_string()) ok = type_matches(t.get<std::string>(), value);
    if (t.is_array())
      for (const auto& one : t)
        ok = ok || (one.is_string() && type_matches(one.get<std::string>(), value));
    if (!ok) {
      errors.push_back(where + ": want type " + t.dump() + ", got " + value.dump());
      return;  // deeper checks would only repeat the mismatch
    }
  }
  if (schema.contains("enum")) {
    bool found = false;
    for (const auto& e : schema["enum"]) found = found || e == value;
    if (!found)
      errors.push_back(where + ": " + value.dump() + " not in enum " + schema["enum"].dump());
  }
  if (value.is_array() && schema.contains("items")) {
    for (size_t i = 0; i < value.size(); ++i)
      validate_at(spec, schema["items"], value[i], where + "[" + std::to_string(i) + "]", errors,
                  depth + 1);
  }
  if (value.is_object()) {
    const nlohmann::json empty = nlohmann::json::object();
    const auto& props = schema.contains("properties") ? schema["properties"] : empty;
    for (auto it = value.begin(); it != value.end(); ++it) {
      std::string at = where + "." + it.key();
      if (props.contains(it.key())) {
        validate_at(spec, props[it.key()], it.value(), at, errors, depth + 1);
      } else if (schema.contains("additionalProperties")) {
        const auto& ap = schema["additionalProperties"];
        if (ap.is_boolean()) {
          if (!ap.get<bool>()) errors.push_back(at + ": property not allowed");
        } else {
          validate_at(spec, ap, it.value(), at, errors, depth + 1);
        }
      }
    }
    if (schema.contains("required"))
      for (const auto& r : schema["required"])
        if (r.is_string() && !value.contains(r.get<std::string>()))
          errors.push_back(where + ": missing required property " + r.get<std::string>());
  }
}

}  // namespace detail

// Every way value departs from schema (empty when it conforms), each as "$.path: what".
inline std::vector<std::string> validate(const nlohmann::json& spec, const nlohmann::json& schema,
                                         const nlohmann::json& value) {
  std::vector<std::string> errors;
  detail::validate_at(spec, schema, value, "$", errors, 0);
  return errors;
}

// The response schema of `method path` (method lower-case, e.g. "get") for `status` in the spec's
// paths; null when the spec has none.
inline nlohmann::json response_schema(const nlohmann::json& spec, const std::string& path,
                                      const std::string& method, int status) {
  auto paths = spec.find("paths");
  if (paths == spec.end() || !paths->contains(path)) return nullptr;
  const auto& op = (*paths)[path];
  if (!op.contains(method)) return nullptr;
  const auto responses = op[method].value("responses", nlohmann::json::object());
  std::string code = std::to_string(status);
  if (responses.contains(code) && responses[code].contains("schema"))
    return responses[code]["schema"];
  if (responses.contains("default") && responses["default"].contains("schema"))
    return responses["default"]["schema"];
  return nullptr;
}

}  // namespace gpud::swagger
