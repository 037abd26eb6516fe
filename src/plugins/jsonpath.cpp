#include "plugins/jsonpath.h"

#include <cctype>
#include <cstdlib>

namespace gpud::plugins {

namespace {

Error syntax_error(std::string_view query, size_t pos, std::string_view what) {
  return make_error("JSONPath \"" + std::string(query) + "\": " + std::string(what) +
                    " at character " + std::to_string(pos + 1));
}

bool is_key_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_' || c == '-' ||
         static_cast<unsigned char>(c) >= 0x80;
}

}  // namespace

Result<JsonPath> JsonPath::compile(std::string_view q) {
  JsonPath p;
  size_t i = 0;
  if (q.empty() || q[0] != '$') return syntax_error(q, 0, "a path starts with '$'");
  ++i;
  while (i < q.size()) {
    if (q[i] == '.') {
      if (i + 1 < q.size() && q[i + 1] == '.')
        return syntax_error(q, i, "recursive descent '..' is not supported");
      ++i;
      if (i < q.size() && q[i] == '*') {
        p.segments_.push_back({Segment::Kind::kWildcard, "", 0});
        p.has_wildcard_ = true;
        ++i;
        continue;
      }
      size_t start = i;
      while (i < q.size() && is_key_char(q[i])) ++i;
      if (i == start) return syntax_error(q, start, "a key is expected after '.'");
      p.segments_.push_back({Segment::Kind::kKey, std::string(q.substr(start, i - start)), 0});
      continue;
    }
    if (q[i] == '[') {
      ++i;
      if (i < q.size() && (q[i] == '\'' || q[i] == '"')) {
        const char quote = q[i++];
        std::string key;
        while (i < q.size() && q[i] != quote) {
          if (q[i] == '\\' && i + 1 < q.size()) ++i;
          key += q[i++];
        }
        if (i >= q.size()) return syntax_error(q, i, "unterminated quoted key");
        ++i;  // the quote
        if (i >= q.size() || q[i] != ']') return syntax_error(q, i, "']' expected");
        ++i;
        p.segments_.push_back({Segment::Kind::kKey, std::move(key), 0});
        continue;
      }
      if (i < q.size() && q[i] == '*') {
        ++i;
        if (i >= q.size() || q[i] != ']') return syntax_error(q, i, "']' expected");
        ++i;
        p.segments_.push_back({Segment::Kind::kWildcard, "", 0});
        p.has_wildcard_ = true;
        continue;
      }
      size_t start = i;
      if (i < q.size() && q[i] == '-') ++i;
      while (i < q.size() && std::isdigit(static_cast<unsigned char>(q[i])) != 0) ++i;
      if (i == start || (i == start + 1 && q[start] == '-') || i - start > 18)
        return syntax_error(q, start,
                            "an index, a quoted key or '*' is expected in [] (filters and slices "
                            "are not supported)");
      if (i >= q.size() || q[i] != ']') return syntax_error(q, i, "']' expected");
      Segment s{Segment::Kind::kIndex, "",
                std::strtoll(std::string(q.substr(start, i - start)).c_str(), nullptr, 10)};
      ++i;
      p.segments_.push_back(std::move(s));
      continue;
    }
    return syntax_error(q, i, std::string("unexpected '") + q[i] + "'");
  }
  return p;
}

std::optional<nlohmann::json> JsonPath::get(const nlohmann::json& doc) const {
  std::vector<const nlohmann::json*> current{&doc};
  for (const Segment& s : segments_) {
    std::vector<const nlohmann::json*> next;
    for (const nlohmann::json* v : current) {
      switch (s.kind) {
        case Segment::Kind::kKey:
          if (v->is_object())
            if (auto it = v->find(s.key); it != v->end()) next.push_back(&*it);
          break;
        case Segment::Kind::kIndex:
          if (v->is_array()) {
            const auto n = static_cast<long long>(v->size());
            const long long at = s.index < 0 ? n + s.index : s.index;
            if (at >= 0 && at < n) next.push_back(&(*v)[static_cast<size_t>(at)]);
          }
          break;
        case Segment::Kind::kWildcard:
          if (v->is_array() || v->is_object())
            for (const auto& item : *v) next.push_back(&item);
          break;
      }
    }
    current = std::move(next);
    if (current.empty()) return std::nullopt;
  }
  if (!has_wildcard_) return *current.front();
  nlohmann::json out = nlohmann::json::array();
  for (const nlohmann::json* v : current) out.push_back(*v);
  return out;
}

Result<std::optional<nlohmann::json>> first_json_object(std::string_view output) {
  const size_t start = output.find('{');
  if (start == std::string_view::npos) return std::optional<nlohmann::json>();
  // The object's end: its closing brace at depth 0, outside strings.
  int depth = 0;
  bool in_string = false;
  size_t end = std::string_view::npos;
  for (size_t i = start; i < output.size(); ++i) {
    const char c = output[i];
    if (in_string) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        in_string = false;
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      ++depth;
    } else if (c == '}' || c == ']') {
      if (--depth == 0) {
        end = i + 1;
        break;
      }
    }
  }
  if (end == std::string_view::npos)
    return make_error("the plugin output's JSON object starting at byte " + std::to_string(start) +
                      " is not closed");
  auto doc = nlohmann::json::parse(output.substr(start, end - start), nullptr, false);
  if (doc.is_discarded() || !doc.is_object())
    return make_error("the plugin output at byte " + std::to_string(start) +
                      " is not a valid JSON object");
  return std::optional<nlohmann::json>(std::move(doc));
}

std::string value_text(const nlohmann::json& v) {
  if (v.is_string()) return v.get<std::string>();
  return v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace gpud::plugins
