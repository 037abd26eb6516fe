#include "core/base64.h"

#include <cctype>
#include <cstdint>

namespace gpud {

// Standard and URL-safe alphabets alike; whitespace is skipped, "=" padding may end it.
std::string decode_base64(std::string_view in, bool& ok) {
  auto value = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+' || c == '-') return 62;
    if (c == '/' || c == '_') return 63;
    return -1;
  };
  std::string out;
  uint32_t acc = 0;
  int bits = 0;
  ok = true;
  bool padding = false;
  for (char c : in) {
    if (std::isspace(static_cast<unsigned char>(c)) != 0) continue;
    if (c == '=') {
      padding = true;
      continue;
    }
    const int v = value(c);
    if (v < 0 || padding) {
      ok = false;
      return {};
    }
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((acc >> bits) & 0xff);
    }
  }
  return out;
}

}  // namespace gpud
