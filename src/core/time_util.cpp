#include "core/time_util.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <ctime>

namespace gpud {
namespace {

bool parse_int(std::string_view s, size_t pos, size_t len, int& out) {
  if (pos + len > s.size()) return false;
  for (size_t i = pos; i < pos + len; ++i)
    if (s[i] < '0' || s[i] > '9') return false;
  auto [p, ec] = std::from_chars(s.data() + pos, s.data() + pos + len, out);
  return ec == std::errc() && p == s.data() + pos + len;
}

std::optional<TimePoint> parse_rfc3339(std::string_view s) {
  // YYYY-MM-DDTHH:MM:SS[.frac](Z|±HH:MM)
  int year, mon, day, hour, min, sec;
  if (s.size() < 20 || !parse_int(s, 0, 4, year) || s[4] != '-' || !parse_int(s, 5, 2, mon) ||
      s[7] != '-' || !parse_int(s, 8, 2, day) || (s[10] != 'T' && s[10] != 't' && s[10] != ' ') ||
      !parse_int(s, 11, 2, hour) || s[13] != ':' || !parse_int(s, 14, 2, min) || s[16] != ':' ||
      !parse_int(s, 17, 2, sec))
    return std::nullopt;
  if (mon < 1 || mon > 12 || day < 1 || day > 31 || hour > 23 || min > 59 || sec > 60)
    return std::nullopt;
  size_t i = 19;
  int64_t frac_us = 0;
  if (i < s.size() && s[i] == '.') {
    ++i;
    size_t start = i;
    int64_t scale = 100000;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') {
      frac_us += (s[i] - '0') * scale;
      scale /= 10;
      ++i;
    }
    if (i == start) return std::nullopt;
  }
  if (i >= s.size()) return std::nullopt;
  int offset_s = 0;
  if (s[i] == 'Z' || s[i] == 'z') {
    ++i;
  } else if (s[i] == '+' || s[i] == '-') {
    int oh, om;
    if (!parse_int(s, i + 1, 2, oh) || i + 3 >= s.size() || s[i + 3] != ':' ||
        !parse_int(s, i + 4, 2, om) || oh > 23 || om > 59)
      return std::nullopt;
    offset_s = (oh * 3600 + om * 60) * (s[i] == '-' ? -1 : 1);
    i += 6;
  } else {
    return std::nullopt;
  }
  if (i != s.size()) return std::nullopt;
  std::tm tm{};
  tm.tm_year = year - 1900;
  tm.tm_mon = mon - 1;
  tm.tm_mday = day;
  tm.tm_hour = hour;
  tm.tm_min = min;
  tm.tm_sec = sec;
  const int64_t t = static_cast<int64_t>(timegm(&tm)) - offset_s;
  // The last second holds only part of a second's ticks.
  constexpr int64_t kLastSecondUs =
      std::chrono::duration_cast<std::chrono::microseconds>(TimePoint::duration::max() -
                                                            std::chrono::seconds(kMaxUnixSeconds))
          .count();
  if (t < kMinUnixSeconds || t > kMaxUnixSeconds ||
      (t == kMaxUnixSeconds && frac_us > kLastSecondUs))
    return std::nullopt;
  return TimePoint(std::chrono::seconds(t)) + std::chrono::microseconds(frac_us);
}

}  // namespace

std::string format_rfc3339(TimePoint t) {
  time_t secs = static_cast<time_t>(to_unix_seconds(t));
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02dZ", tm.tm_year + 1900, tm.tm_mon + 1,
                tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
  return buf;
}

std::optional<TimePoint> parse_time(std::string_view s) {
  if (s.empty()) return std::nullopt;
  bool digits = true;
  for (size_t i = 0; i < s.size(); ++i)
    if (!(s[i] >= '0' && s[i] <= '9') && !(i == 0 && s[i] == '-')) digits = false;
  if (digits) {
    int64_t v = 0;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
    if (v < kMinUnixSeconds || v > kMaxUnixSeconds) return std::nullopt;
    return from_unix_seconds(v);
  }
  return parse_rfc3339(s);
}

std::optional<std::chrono::milliseconds> parse_duration(std::string_view s) {
  if (s.empty()) return std::nullopt;
  bool all_digits = true;
  for (char c : s)
    if (c < '0' || c > '9') all_digits = false;
  if (all_digits) {
    int64_t v = 0;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc() || v > std::chrono::seconds(kMaxDuration).count()) return std::nullopt;
    return std::chrono::milliseconds(v * 1000);
  }
  double total_ms = 0;
  size_t i = 0;
  while (i < s.size()) {
    size_t start = i;
    while (i < s.size() && ((s[i] >= '0' && s[i] <= '9') || s[i] == '.')) ++i;
    if (i == start) return std::nullopt;
    double num = 0;
    auto [p, ec] = std::from_chars(s.data() + start, s.data() + i, num);
    if (ec != std::errc() || p != s.data() + i) return std::nullopt;
    size_t ustart = i;
    while (i < s.size() && ((s[i] >= 'a' && s[i] <= 'z'))) ++i;
    std::string_view unit = s.substr(ustart, i - ustart);
    double mult;
    if (unit == "ms")
      mult = 1;
    else if (unit == "s")
      mult = 1000;
    else if (unit == "m")
      mult = 60'000;
    else if (unit == "h")
      mult = 3'600'000;
    else if (unit == "d")
      mult = 86'400'000;
    else
      return std::nullopt;
    total_ms += num * mult;
  }
  if (!std::isfinite(total_ms) ||
      total_ms > static_cast<double>(std::chrono::milliseconds(kMaxDuration).count()))
    return std::nullopt;
  return std::chrono::milliseconds(static_cast<int64_t>(total_ms));
}

std::string format_duration(std::chrono::seconds d) {
  int64_t s = d.count();
  std::string out;
  if (s < 0) {
    out.push_back('-');
    s = -s;
  }
  int64_t h = s / 3600, m = (s % 3600) / 60, sec = s % 60;
  // Appended piecewise: `out += to_string(x) + "h"` trips g++-12's false -Wrestrict.
  if (h > 0) {
    out.append(std::to_string(h));
    out.push_back('h');
  }
  if (h > 0 || m > 0) {
    out.append(std::to_string(m));
    out.push_back('m');
  }
  out.append(std::to_string(sec));
  out.push_back('s');
  return out;
}

int64_t to_unix_ms(TimePoint t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
}
int64_t to_unix_seconds(TimePoint t) {
  return std::chrono::floor<std::chrono::seconds>(t.time_since_epoch()).count();
}
TimePoint from_unix_ms(int64_t ms) { return TimePoint(std::chrono::milliseconds(ms)); }
TimePoint from_unix_seconds(int64_t s) { return TimePoint(std::chrono::seconds(s)); }

}  // namespace gpud
