// Base64 decoding, for the few places that read base64 text (plugin scripts, kubeconfig data).
#pragma once

#include <string>
#include <string_view>

namespace gpud {

// The bytes `in` encodes in base64 (standard or URL-safe alphabet, whitespace skipped); `ok` is
// false (and the result empty) when it is not base64.
std::string decode_base64(std::string_view in, bool& ok);

}  // namespace gpud
