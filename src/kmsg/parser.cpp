#include "kmsg/parser.h"

#include <time.h>

#include <array>
#include <cstdint>
#include <cstring>

#include "core/time_util.h"

namespace gpud::kmsg {
namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// Reads digits at s[i..], at most max_digits; false if none.
bool read_uint(std::string_view s, size_t& i, uint64_t& out, size_t max_digits = 20) {
  const size_t start = i;
  uint64_t v = 0;
  while (i < s.size() && is_digit(s[i]) && i - start < max_digits) {
    v = v * 10 + static_cast<uint64_t>(s[i] - '0');
    ++i;
  }
  out = v;
  return i > start;
}

bool read_fixed(std::string_view s, size_t& i, size_t n, int& out) {
  if (i + n > s.size()) return false;
  int v = 0;
  for (size_t k = 0; k < n; ++k) {
    if (!is_digit(s[i + k])) return false;
    v = v * 10 + (s[i + k] - '0');
  }
  i += n;
  out = v;
  return true;
}

int month_index(std::string_view m) {
  static constexpr std::array<std::string_view, 12> kMonths = {
      "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  for (size_t i = 0; i < kMonths.size(); ++i)
    if (m == kMonths[i]) return static_cast<int>(i);
  return -1;
}

// A date a line carries that TimePoint cannot hold (before 1970, after 2262): the line is rejected
// rather than given a wrapped time. Used only inside this file, between the prefix parsers and
// parse_line_view.
constexpr TimePoint kOutOfRange = TimePoint::min();

TimePoint checked_time(int64_t secs, int64_t micros) {
  if (secs < kMinUnixSeconds || secs > kMaxUnixSeconds) return kOutOfRange;
  const TimePoint base{std::chrono::seconds(secs)};
  const TimePoint t = saturating_add(base, std::chrono::microseconds(micros));
  return t == TimePoint::max() ? kOutOfRange : t;
}

// boot time + microseconds since boot, for the monotonic stamps of /dev/kmsg and dmesg.
TimePoint since_boot(TimePoint boot, uint64_t micros) {
  if (micros > static_cast<uint64_t>(INT64_MAX)) return kOutOfRange;
  const TimePoint t = saturating_add(boot, std::chrono::microseconds(static_cast<int64_t>(micros)));
  return t == TimePoint::max() || t > TimePoint{std::chrono::seconds(kMaxUnixSeconds)} ? kOutOfRange
                                                                                       : t;
}

// A date's fields in UTC (timegm) or in the process's local zone (mktime, which picks DST
// itself); nullopt for fields out of their range.
enum class Zone { kUtc, kLocal };
std::optional<TimePoint> make_time(Zone zone, int year, int mon0, int day, int h, int m, int s,
                                   int64_t micros = 0, int64_t offset_s = 0) {
  if (mon0 < 0 || mon0 > 11 || day < 1 || day > 31 || h > 23 || m > 59 || s > 60) {
    return std::nullopt;
  }
  // Years far outside the range are refused before timegm, whose int tm_year they could overflow.
  if (year < 1900 || year > 9999) return kOutOfRange;
  struct tm t {};
  t.tm_year = year - 1900;
  t.tm_mon = mon0;
  t.tm_mday = day;
  t.tm_hour = h;
  t.tm_min = m;
  t.tm_sec = s;
  t.tm_isdst = -1;
  const time_t secs = zone == Zone::kUtc ? timegm(&t) : mktime(&t);
  return checked_time(static_cast<int64_t>(secs) - offset_s, micros);
}

int local_year(TimePoint now) {
  const time_t secs = static_cast<time_t>(to_unix_seconds(now));
  struct tm t {};
  localtime_r(&secs, &t);
  return t.tm_year + 1900;
}

// A syslog date has no year: the given one, else now's, else (a date more than an hour ahead of
// now, which cannot have been logged yet) the year before.
std::optional<TimePoint> syslog_time(const ParseOptions& opts, int mon0, int day, int h, int m,
                                     int s) {
  if (opts.year != 0) return make_time(Zone::kLocal, opts.year, mon0, day, h, m, s);
  const TimePoint now = opts.now.value_or(Clock::now());
  const int year = local_year(now);
  auto t = make_time(Zone::kLocal, year, mon0, day, h, m, s);
  if (t && *t != kOutOfRange && *t > now + std::chrono::hours(1))
    t = make_time(Zone::kLocal, year - 1, mon0, day, h, m, s);
  return t;
}

// "HH:MM:SS" at s[i..].
bool read_hms(std::string_view s, size_t& i, int& h, int& m, int& sec) {
  return read_fixed(s, i, 2, h) && i < s.size() && s[i++] == ':' && read_fixed(s, i, 2, m) &&
         i < s.size() && s[i++] == ':' && read_fixed(s, i, 2, sec);
}

// "[  123.456789] " -> seconds and microseconds since boot.
bool parse_dmesg_prefix(std::string_view s, size_t& i, int64_t& micros) {
  size_t j = i;
  if (j >= s.size() || s[j] != '[') return false;
  ++j;
  while (j < s.size() && s[j] == ' ') ++j;
  uint64_t secs = 0, frac = 0;
  if (!read_uint(s, j, secs, 12)) return false;
  if (j >= s.size() || s[j] != '.') return false;
  ++j;
  const size_t fstart = j;
  if (!read_uint(s, j, frac, 9)) return false;
  size_t digits = j - fstart;
  while (digits < 6) {
    frac *= 10;
    ++digits;
  }
  while (digits > 6) {
    frac /= 10;
    --digits;
  }
  if (j >= s.size() || s[j] != ']') return false;
  ++j;
  if (j < s.size() && s[j] == ' ') ++j;
  micros = static_cast<int64_t>(secs) * 1000000 + static_cast<int64_t>(frac);
  i = j;
  return true;
}

// "[Mon Jan  1 00:00:00 2024] "
bool parse_ctime_prefix(std::string_view s, size_t& i, std::optional<TimePoint>& out) {
  size_t j = i;
  if (s.size() < j + 26 || s[j] != '[') return false;
  ++j;
  j += 3;  // weekday
  if (s[j++] != ' ') return false;
  const int mon = month_index(s.substr(j, 3));
  if (mon < 0) return false;
  j += 3;
  if (s[j++] != ' ') return false;
  if (s[j] == ' ') ++j;
  uint64_t day = 0;
  if (!read_uint(s, j, day, 2)) return false;
  if (j >= s.size() || s[j++] != ' ') return false;
  int h = 0, m = 0, sec = 0, year = 0;
  if (!read_hms(s, j, h, m, sec)) return false;
  if (j >= s.size() || s[j++] != ' ') return false;
  if (!read_fixed(s, j, 4, year)) return false;
  if (j >= s.size() || s[j++] != ']') return false;
  if (j < s.size() && s[j] == ' ') ++j;
  out = make_time(Zone::kLocal, year, mon, static_cast<int>(day), h, m, sec);
  i = j;
  return true;
}

// "2024-01-01T00:00:00[,.]123456(+00:00|Z|+0000) "
bool parse_iso_prefix(std::string_view s, size_t& i, std::optional<TimePoint>& out) {
  size_t j = i;
  int y = 0, mo = 0, d = 0, h = 0, m = 0, sec = 0;
  if (!read_fixed(s, j, 4, y) || j >= s.size() || s[j++] != '-' || !read_fixed(s, j, 2, mo) ||
      j >= s.size() || s[j++] != '-' || !read_fixed(s, j, 2, d) || j >= s.size() || s[j++] != 'T' ||
      !read_hms(s, j, h, m, sec)) {
    return false;
  }
  int64_t micros = 0;
  if (j < s.size() && (s[j] == ',' || s[j] == '.')) {
    ++j;
    const size_t fstart = j;
    uint64_t frac = 0;
    if (!read_uint(s, j, frac, 9)) return false;
    size_t digits = j - fstart;
    while (digits < 6) frac *= 10, ++digits;
    while (digits > 6) frac /= 10, --digits;
    micros = static_cast<int64_t>(frac);
  }
  int64_t offset = 0;
  if (j < s.size() && s[j] == 'Z') {
    ++j;
  } else if (j < s.size() && (s[j] == '+' || s[j] == '-')) {
    const int sign = s[j] == '-' ? -1 : 1;
    ++j;
    int oh = 0, om = 0;
    if (!read_fixed(s, j, 2, oh)) return false;
    if (j < s.size() && s[j] == ':') ++j;
    if (!read_fixed(s, j, 2, om)) return false;
    offset = sign * (oh * 3600 + om * 60);
  }
  if (j < s.size() && s[j] != ' ') return false;
  if (j < s.size()) ++j;
  out = make_time(Zone::kUtc, y, mo - 1, d, h, m, sec, micros, offset);
  i = j;
  return true;
}

// "Jan 01 00:00:00 " / "Jan  1 00:00:00 "
bool parse_syslog_date(std::string_view s, size_t& i, const ParseOptions& opts,
                       std::optional<TimePoint>& out) {
  size_t j = i;
  if (s.size() < j + 16) return false;
  const int mon = month_index(s.substr(j, 3));
  if (mon < 0) return false;
  j += 3;
  if (s[j++] != ' ') return false;
  if (s[j] == ' ') ++j;
  uint64_t day = 0;
  if (!read_uint(s, j, day, 2)) return false;
  if (j >= s.size() || s[j++] != ' ') return false;
  int h = 0, m = 0, sec = 0;
  if (!read_hms(s, j, h, m, sec)) return false;
  if (j < s.size() && s[j] == '.') {  // journalctl -o short-precise
    ++j;
    uint64_t ignored = 0;
    (void)read_uint(s, j, ignored, 9);
  }
  if (j >= s.size() || s[j++] != ' ') return false;
  out = syslog_time(opts, mon, static_cast<int>(day), h, m, sec);
  i = j;
  return true;
}

// "host tag: " after a syslog date. Returns false when the shape is not there.
bool skip_host_and_tag(std::string_view s, size_t& i) {
  const size_t sp = s.find(' ', i);
  if (sp == std::string_view::npos || sp == i) return false;
  const size_t colon = s.find(": ", sp + 1);
  if (colon == std::string_view::npos) return false;
  // The tag ("kernel", "systemd[1]") has no spaces.
  if (s.substr(sp + 1, colon - sp - 1).find(' ') != std::string_view::npos) return false;
  i = colon + 2;
  return true;
}

// "<6>" prefix (dmesg -r, kmsg writes).
void strip_priority_prefix(std::string_view s, size_t& i, KmsgRecordView& r) {
  if (i >= s.size() || s[i] != '<') return;
  size_t j = i + 1;
  uint64_t v = 0;
  if (!read_uint(s, j, v, 4) || j >= s.size() || s[j] != '>') return;
  r.priority = static_cast<int>(v & 7);
  r.facility = static_cast<int>(v >> 3);
  i = j + 1;
}

}  // namespace

std::string_view to_string(Format f) {
  switch (f) {
    case Format::kBare: return "bare";
    case Format::kRawKmsg: return "kmsg";
    case Format::kDmesg: return "dmesg";
    case Format::kDmesgCtime: return "dmesg-ctime";
    case Format::kDmesgIso: return "dmesg-iso";
    case Format::kSyslog: return "syslog";
    case Format::kSyslogIso: return "syslog-iso";
  }
  return "bare";
}

std::optional<KmsgRecordView> parse_line_view(std::string_view line, const ParseOptions& opts) {
  while (!line.empty() && (line.back() == '\r' || line.back() == '\n')) line.remove_suffix(1);
  if (line.empty()) return std::nullopt;
  // /dev/kmsg continuation lines carry dictionary KEY=VALUE pairs.
  if (line[0] == ' ' && line.find('=') != std::string_view::npos &&
      line.find_first_not_of(' ') != std::string_view::npos &&
      line.substr(line.find_first_not_of(' ')).find(' ') == std::string_view::npos) {
    return std::nullopt;
  }

  KmsgRecordView r;
  size_t i = 0;
  const char c0 = line[0];

  if (is_digit(c0)) {
    // Raw kmsg: "P,SEQ,USEC,FLAGS;msg".
    size_t j = 0;
    uint64_t prio = 0, seq = 0, usec = 0;
    if (read_uint(line, j, prio, 4) && j < line.size() && line[j] == ',' &&
        read_uint(line, ++j, seq) && j < line.size() && line[j] == ',' &&
        read_uint(line, ++j, usec)) {
      const size_t semi = line.find(';', j);
      if (semi != std::string_view::npos && semi - j < 32 &&
          line.substr(j, semi - j).find(' ') == std::string_view::npos) {
        r.format = Format::kRawKmsg;
        r.priority = static_cast<int>(prio & 7);
        r.facility = static_cast<int>(prio >> 3);
        r.seq = seq;
        if (usec <= static_cast<uint64_t>(INT64_MAX)) r.boot_offset_us = static_cast<int64_t>(usec);
        if (opts.boot_time) r.time = since_boot(*opts.boot_time, usec);
        i = semi + 1;
      }
    }
    if (r.format == Format::kBare) {
      std::optional<TimePoint> t;
      size_t j2 = 0;
      if (parse_iso_prefix(line, j2, t)) {
        size_t k = j2;
        if (skip_host_and_tag(line, k) &&
            line.substr(j2, k - j2).find("kernel:") != std::string_view::npos) {
          r.format = Format::kSyslogIso;
          i = k;
        } else {
          r.format = Format::kDmesgIso;
          i = j2;
        }
        r.time = t;
      }
    }
  } else if (c0 == '<') {
    strip_priority_prefix(line, i, r);
  }

  if (r.format == Format::kBare && i < line.size() && line[i] == '[') {
    int64_t micros = 0;
    std::optional<TimePoint> t;
    if (parse_dmesg_prefix(line, i, micros)) {
      r.format = Format::kDmesg;
      r.boot_offset_us = micros;
      if (opts.boot_time) r.time = since_boot(*opts.boot_time, static_cast<uint64_t>(micros));
    } else if (parse_ctime_prefix(line, i, t)) {
      r.format = Format::kDmesgCtime;
      r.time = t;
    }
  } else if (r.format == Format::kBare && c0 >= 'A' && c0 <= 'S') {
    std::optional<TimePoint> t;
    size_t j = 0;
    if (parse_syslog_date(line, j, opts, t) && skip_host_and_tag(line, j)) {
      r.format = Format::kSyslog;
      r.time = t;
      i = j;
    }
  }
  // kern.log often repeats the dmesg timestamp after "kernel: ".
  if ((r.format == Format::kSyslog || r.format == Format::kSyslogIso) && i < line.size() &&
      line[i] == '[') {
    int64_t micros = 0;
    if (parse_dmesg_prefix(line, i, micros)) r.boot_offset_us = micros;
  }

  if (r.time == kOutOfRange) return std::nullopt;

  std::string_view msg = line.substr(std::min(i, line.size()));
  if (msg.size() > kMaxMessageBytes) msg = msg.substr(0, kMaxMessageBytes);
  r.message = msg;
  return r;
}

KmsgRecord to_record(const KmsgRecordView& v) {
  KmsgRecord r;
  r.priority = v.priority;
  r.facility = v.facility;
  r.seq = v.seq;
  r.time = v.time;
  r.boot_offset_us = v.boot_offset_us;
  r.message = sanitize_utf8(v.message);
  r.format = v.format;
  return r;
}

std::optional<KmsgRecord> parse_line(std::string_view line, const ParseOptions& opts) {
  auto v = parse_line_view(line, opts);
  if (!v) return std::nullopt;
  return to_record(*v);
}

std::string sanitize_utf8(std::string_view s) {
  static constexpr std::string_view kReplacement = "\xEF\xBF\xBD";
  std::string out;
  out.reserve(s.size());
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  size_t i = 0;
  while (i < n) {
    const unsigned char c = p[i];
    if (c != 0 && c < 0x80) {
      out.push_back(static_cast<char>(c));
      ++i;
      continue;
    }
    size_t len = 0;
    uint32_t cp = 0;
    if (c >= 0xC2 && c <= 0xDF) {
      len = 2, cp = c & 0x1F;
    } else if (c >= 0xE0 && c <= 0xEF) {
      len = 3, cp = c & 0x0F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      len = 4, cp = c & 0x07;
    }
    bool ok = len > 0 && i + len <= n;
    for (size_t k = 1; ok && k < len; ++k) {
      if ((p[i + k] & 0xC0) != 0x80) ok = false;
      cp = (cp << 6) | (p[i + k] & 0x3F);
    }
    if (ok) {
      // Reject overlong forms, surrogates and values past U+10FFFF.
      if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)) ||
          (cp >= 0xD800 && cp <= 0xDFFF)) {
        ok = false;
      }
    }
    if (ok) {
      out.append(s.substr(i, len));
      i += len;
    } else {
      out.append(kReplacement);
      ++i;
    }
  }
  return out;
}

TimePoint estimate_boot_time() {
  struct timespec ts {};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  const auto since_boot = std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec);
  return Clock::now() - std::chrono::duration_cast<Clock::duration>(since_boot);
}

}  // namespace gpud::kmsg
