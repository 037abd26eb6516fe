// The YAML files gpud reads (its configuration, custom plugin specs): text only, no aliases, and
// errors that name the file and line. Whoever can write such a file cannot make gpud allocate
// without bound or choke on bytes that are not text.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstddef>
#include <string>
#include <string_view>

#include "core/result.h"

namespace gpud {

// The line (1-based) of the first byte of `s` that is not text, a NUL or a sequence that is not
// UTF-8 (overlong forms and surrogates included), or 0. What gpud reads ends up in JSON answers and
// log lines, which need text.
int first_non_text_line(std::string_view s);

// Parses one YAML document. Refused, with "<source>:<line>: ..." messages: bytes that are not
// text, any alias (*name: a few hundred bytes of nested ones stand for billions of values, and
// every walk over the loaded graph visits each), and text that is not YAML.
[[nodiscard]] Result<YAML::Node> parse_yaml_text(std::string_view text, const std::string& source);

}  // namespace gpud
