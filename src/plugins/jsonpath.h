// The JSONPath subset custom plugins' parsers use: `$`, `.key`, `['key']`/`["key"]`, `[n]`
// (negative counts from the end) and the wildcard `*` / `[*]`. Debian ships no C++ JSONPath
// library, and these are the forms GPUd's plugin specs use; filters and `..` are refused at load.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace gpud::plugins {

class JsonPath {
 public:
  // Compiles `query`; an error says what is unsupported or malformed and where.
  [[nodiscard]] static Result<JsonPath> compile(std::string_view query);
  // The value at the path, or nullopt when a key or index is missing. A path with a wildcard
  // returns the array of every match (nullopt when none).
  std::optional<nlohmann::json> get(const nlohmann::json& doc) const;

  struct Segment {
    enum class Kind { kKey, kIndex, kWildcard };
    Kind kind = Kind::kKey;
    std::string key;
    long long index = 0;
  };
  const std::vector<Segment>& segments() const { return segments_; }

 private:
  std::vector<Segment> segments_;
  bool has_wildcard_ = false;
};

// The first JSON object in a plugin's output (text before it is skipped, as GPUd does; so is text
// after it). nullopt when the output holds no '{'; an error when what starts there is not JSON.
[[nodiscard]] Result<std::optional<nlohmann::json>> first_json_object(std::string_view output);

// A value as the parser compares and reports it: strings as they are, other scalars in JSON text
// ("true", "3", "null"), objects and arrays as compact JSON.
std::string value_text(const nlohmann::json& v);

}  // namespace gpud::plugins
