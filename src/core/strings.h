// The small string helpers every layer needs, in one copy.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace gpud {

// `s` without leading and trailing ASCII whitespace (space, tab, CR, LF, VT, FF).
std::string_view trim(std::string_view s);
// The parts with `sep` between them ("" for none).
std::string join(const std::vector<std::string>& parts, std::string_view sep);
// `s` with ASCII letters in lower case (HTTP header names and tokens).
std::string to_lower(std::string_view s);
// The longest prefix of `s` of at most `max_bytes` bytes that splits no UTF-8 character (it ends
// before a continuation byte, 10xxxxxx).
std::string_view utf8_prefix(std::string_view s, size_t max_bytes);

}  // namespace gpud
