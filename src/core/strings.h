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

}  // namespace gpud
