// Bounded, non-throwing number parsing for text that comes from outside (kernel log lines, files,
// request parameters): a value out of the type's range is "no value", never an exception.
#pragma once

#include <charconv>
#include <optional>
#include <string_view>
#include <system_error>
#include <type_traits>

namespace gpud {

// The whole of `s` as an integer of type T in `base` (an optional "0x"/"0X" prefix is accepted for
// base 16); nullopt when `s` is empty, has other characters or does not fit in T.
template <typename T>
[[nodiscard]] std::optional<T> parse_integer(std::string_view s, int base = 10) {
  static_assert(std::is_integral_v<T>);
  if (base == 16 && s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) s.remove_prefix(2);
  if (s.empty()) return std::nullopt;
  T v{};
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v, base);
  if (ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return v;
}

}  // namespace gpud
