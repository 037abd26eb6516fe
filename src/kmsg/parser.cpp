#include "kmsg/parser.h"

#include <time.h>

#include <algorithm>
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

bool is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

// Month abbreviations as strftime's %b prints them: the C locale's, and those of the locales
// whose journalctl, dmesg -T and dmesg -H output gpud has been given (German "Mär"/"Dez", French
// "févr."/"déc.", Spanish, Italian, Dutch, Portuguese). Compared without ASCII case; a trailing
// '.' is read by read_month. No spelling names two months.
int month_index(std::string_view m) {
  // Each month's spellings, separated by spaces.
  static constexpr std::array<std::string_view, 12> kSpellings = {
      "jan janv ene gen j\xc3\xa4n",
      "feb fev f\xc3\xa9v f\xc3\xa9vr",
      "mar mars m\xc3\xa4r mrz mrt",
      "apr avr abr",
      "may mai mag mei",
      "jun juin giu",
      "jul juil lug",
      "aug ago ao\xc3\xbbt",
      "sep sept set",
      "oct okt ott out",
      "nov",
      "dec dez dic d\xc3\xa9"
      "c",
  };
  if (m.size() > 8) return -1;
  char lower[8];
  for (size_t i = 0; i < m.size(); ++i)
    lower[i] = m[i] >= 'A' && m[i] <= 'Z' ? static_cast<char>(m[i] - 'A' + 'a') : m[i];
  const std::string_view key(lower, m.size());
  for (size_t month = 0; month < kSpellings.size(); ++month) {
    std::string_view names = kSpellings[month];
    while (!names.empty()) {
      const size_t sp = std::min(names.find(' '), names.size());
      if (names.substr(0, sp) == key) return static_cast<int>(month);
      names.remove_prefix(std::min(sp + 1, names.size()));
    }
  }
  return -1;
}

// A month name at s[i..]: letters (UTF-8 bytes too) and an optional '.'.
bool read_month(std::string_view s, size_t& i, int& mon) {
  size_t j = i;
  while (j < s.size() && j - i < 8 && (is_alpha(s[j]) || static_cast<unsigned char>(s[j]) >= 0x80))
    ++j;
  const int m = month_index(s.substr(i, j - i));
  if (m < 0) return false;
  if (j < s.size() && s[j] == '.') ++j;
  mon = m;
  i = j;
  return true;
}

// Digits after a decimal point at s[i..] (at most 9) as microseconds.
bool read_fraction_us(std::string_view s, size_t& i, int64_t& micros) {
  const size_t start = i;
  uint64_t frac = 0;
  if (!read_uint(s, i, frac, 9)) return false;
  for (size_t digits = i - start; digits < 6; ++digits) frac *= 10;
  for (size_t digits = i - start; digits > 6; --digits) frac /= 10;
  micros = static_cast<int64_t>(frac);
  return true;
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
                                     int s, int64_t micros = 0) {
  if (opts.year != 0) return make_time(Zone::kLocal, opts.year, mon0, day, h, m, s, micros);
  const TimePoint now = opts.now.value_or(Clock::now());
  const int year = local_year(now);
  auto t = make_time(Zone::kLocal, year, mon0, day, h, m, s, micros);
  if (t && *t != kOutOfRange && *t > now + std::chrono::hours(1))
    t = make_time(Zone::kLocal, year - 1, mon0, day, h, m, s, micros);
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
  uint64_t secs = 0;
  int64_t frac = 0;
  if (!read_uint(s, j, secs, 12)) return false;
  if (j >= s.size() || s[j] != '.') return false;
  ++j;
  if (!read_fraction_us(s, j, frac)) return false;
  if (j >= s.size() || s[j] != ']') return false;
  ++j;
  if (j < s.size() && s[j] == ' ') ++j;
  micros = static_cast<int64_t>(secs) * 1000000 + frac;
  i = j;
  return true;
}

// "[Mon Jan  1 00:00:00 2024] " (strftime's "%a %b %e %H:%M:%S %Y": the day and month names are
// the locale's, "[So Dez  6 ...]", "[dim. déc.  6 ...]").
bool parse_ctime_prefix(std::string_view s, size_t& i, std::optional<TimePoint>& out) {
  size_t j = i;
  if (j >= s.size() || s[j] != '[') return false;
  ++j;
  const size_t weekday = j;
  while (j < s.size() && j - weekday < 12 && s[j] != ' ' && s[j] != ']') ++j;
  if (j == weekday || j >= s.size() || s[j++] != ' ') return false;
  int mon = 0;
  if (!read_month(s, j, mon)) return false;
  if (j >= s.size() || s[j++] != ' ') return false;
  if (j < s.size() && s[j] == ' ') ++j;
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

// dmesg -H (--reltime): "[Dec 6 22:21] " on the first line of a minute (strftime "%b%e %H:%M", so
// "[Dec16 22:21] " from the 10th), "[  +0.000123] " (the time since the previous line) on the
// others. A date without its year is read as syslog's; a delta gives no time on its own (`delta_us`
// gets it: the reader dates the line from the lines before).
bool parse_reltime_prefix(std::string_view s, size_t& i, const ParseOptions& opts,
                          std::optional<TimePoint>& out, std::optional<int64_t>& delta_us) {
  size_t j = i;
  if (j >= s.size() || s[j] != '[') return false;
  ++j;
  while (j < s.size() && s[j] == ' ') ++j;
  if (j < s.size() && (s[j] == '+' || s[j] == '-')) {
    const bool negative = s[j] == '-';
    ++j;
    uint64_t secs = 0;
    int64_t frac = 0;
    if (!read_uint(s, j, secs, 12) || j >= s.size() || s[j++] != '.' ||
        !read_fraction_us(s, j, frac) || j >= s.size() || s[j++] != ']')
      return false;
    out.reset();
    // At most 12 digits of seconds: no overflow in microseconds.
    const int64_t us = static_cast<int64_t>(secs) * 1000000 + frac;
    delta_us = negative ? -us : us;
  } else {
    int mon = 0, h = 0, m = 0;
    uint64_t day = 0;
    if (!read_month(s, j, mon)) return false;
    if (j < s.size() && s[j] == ' ') ++j;
    if (!read_uint(s, j, day, 2) || j >= s.size() || s[j++] != ' ' || !read_fixed(s, j, 2, h) ||
        j >= s.size() || s[j++] != ':' || !read_fixed(s, j, 2, m) || j >= s.size() || s[j++] != ']')
      return false;
    out = syslog_time(opts, mon, static_cast<int>(day), h, m, 0);
  }
  if (j < s.size() && s[j] == ' ') ++j;
  i = j;
  return true;
}

// "2024-01-01T00:00:00[,.]123456(+00:00|Z|+0000) "
// `end`: the byte that follows the stamp (consumed), or the end of the line.
bool parse_iso_prefix(std::string_view s, size_t& i, std::optional<TimePoint>& out,
                      char end = ' ') {
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
    if (!read_fraction_us(s, j, micros)) return false;
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
  if (j < s.size() && s[j] != end) return false;
  if (j < s.size()) ++j;
  out = make_time(Zone::kUtc, y, mo - 1, d, h, m, sec, micros, offset);
  i = j;
  return true;
}

// "Jan 01 00:00:00 " / "Jan  1 00:00:00 " / "Jan 01 00:00:00.123456 " (journalctl -o
// short-precise); the month in the log's locale ("Dez 06 ...", "déc. 06 ...").
bool parse_syslog_date(std::string_view s, size_t& i, const ParseOptions& opts,
                       std::optional<TimePoint>& out) {
  size_t j = i;
  int mon = 0;
  if (!read_month(s, j, mon)) return false;
  if (j >= s.size() || s[j++] != ' ') return false;
  if (j < s.size() && s[j] == ' ') ++j;
  uint64_t day = 0;
  if (!read_uint(s, j, day, 2)) return false;
  if (j >= s.size() || s[j++] != ' ') return false;
  int h = 0, m = 0, sec = 0;
  if (!read_hms(s, j, h, m, sec)) return false;
  int64_t micros = 0;
  if (j < s.size() && s[j] == '.') {
    ++j;
    if (!read_fraction_us(s, j, micros)) return false;
  }
  if (j >= s.size() || s[j++] != ' ') return false;
  out = syslog_time(opts, mon, static_cast<int>(day), h, m, sec, micros);
  i = j;
  return true;
}

// "tag[pid]:" or "tag:" with a name of letters, digits and "._-/".
bool is_syslog_tag(std::string_view t) {
  if (t.size() < 2 || t.back() != ':') return false;
  t.remove_suffix(1);
  if (t.back() == ']') {
    const size_t open = t.find('[');
    if (open == std::string_view::npos || open == 0) return false;
    for (char c : t.substr(open + 1, t.size() - open - 2))
      if (!is_digit(c)) return false;
    t = t.substr(0, open);
  }
  for (char c : t)
    if (!is_alpha(c) && !is_digit(c) && c != '.' && c != '_' && c != '-' && c != '/') return false;
  return true;
}

// "host tag: " after a syslog date, or the tag alone when the log leaves the host name out
// ("kernel: ", "systemd[1]: "; `hostless_tags` false: "kernel: " only). Returns false when the
// shape is not there.
bool skip_host_and_tag(std::string_view s, size_t& i, bool hostless_tags = true) {
  const size_t sp = s.find(' ', i);
  if (sp == std::string_view::npos || sp == i) return false;
  const std::string_view first = s.substr(i, sp - i);
  // A host name holds no ':' (rsyslog prints IPv6 peers in brackets): "kernel:" is the tag.
  if (first == "kernel:" || (hostless_tags && is_syslog_tag(first))) {
    i = sp + 1;
    return true;
  }
  const size_t colon = s.find(": ", sp + 1);
  if (colon == std::string_view::npos) return false;
  // The tag ("kernel", "systemd[1]") has no spaces.
  if (s.substr(sp + 1, colon - sp - 1).find(' ') != std::string_view::npos) return false;
  i = colon + 2;
  return true;
}

// RFC 5424 after its "<PRI>": "1 TIMESTAMP HOST APP-NAME PROCID MSGID STRUCTURED-DATA MSG", each
// field "-" when absent, the message perhaps after a UTF-8 byte-order mark.
bool parse_rfc5424(std::string_view s, size_t& i, std::optional<TimePoint>& out) {
  const size_t n = s.size();
  size_t j = i;
  if (j + 2 > n || s[j] != '1' || s[j + 1] != ' ') return false;
  j += 2;
  if (j < n && s[j] == '-') {
    if (++j >= n || s[j++] != ' ') return false;
  } else if (!parse_iso_prefix(s, j, out)) {
    return false;
  }
  for (int field = 0; field < 4; ++field) {  // HOST APP-NAME PROCID MSGID
    const size_t sp = s.find(' ', j);
    if (sp == std::string_view::npos || sp == j) return false;
    j = sp + 1;
  }
  if (j < n && s[j] == '-') {
    ++j;
  } else if (j < n && s[j] == '[') {
    while (j < n && s[j] == '[') {  // SD-ELEMENTs: values are quoted, with \" \\ \] escapes
      bool quoted = false;
      for (++j; j < n; ++j) {
        if (s[j] == '\\' && quoted) {
          ++j;
        } else if (s[j] == '"') {
          quoted = !quoted;
        } else if (s[j] == ']' && !quoted) {
          break;
        }
      }
      if (j >= n) return false;
      ++j;
    }
  } else {
    return false;
  }
  if (j < n && s[j++] != ' ') return false;
  if (s.substr(j).starts_with("\xEF\xBB\xBF")) j += 3;
  i = j;
  return true;
}

// Talos's kernel log (talosctl dmesg, the machined console): "kern: warning:
// [2024-01-01T00:00:00.123456789Z]: msg", the level padded ("kern:    info: [...]: "), perhaps
// after the node ("172.20.0.2: kern: ..."). The facility and level are syslog's names.
bool parse_talos_prefix(std::string_view s, size_t& i, KmsgRecordView& r,
                        std::optional<TimePoint>& out) {
  static constexpr std::string_view kFacilities[] = {
      "kern",   "user",   "mail",     "daemon", "auth",   "syslog", "lpr",    "news",
      "uucp",   "cron",   "authpriv", "ftp",    "",       "",       "",       "",
      "local0", "local1", "local2",   "local3", "local4", "local5", "local6", "local7"};
  static constexpr std::string_view kLevels[] = {"emerg",   "alert",  "crit", "err",
                                                 "warning", "notice", "info", "debug"};
  auto word_at = [&](size_t j, auto& names) -> int {
    const size_t colon = s.find(':', j);
    if (colon == std::string_view::npos || colon - j > 8) return -1;
    const std::string_view w = s.substr(j, colon - j);
    for (size_t k = 0; k < std::size(names); ++k)
      if (!names[k].empty() && names[k] == w) return static_cast<int>(k);
    return -1;
  };
  size_t j = i;
  int facility = word_at(j, kFacilities);
  if (facility < 0) {  // the node first
    const size_t sp = s.find(": ", j);
    if (sp == std::string_view::npos || sp == j || sp - j > 64 ||
        s.substr(j, sp - j).find(' ') != std::string_view::npos)
      return false;
    j = sp + 2;
    facility = word_at(j, kFacilities);
    if (facility < 0) return false;
  }
  j = s.find(':', j) + 1;
  while (j < s.size() && s[j] == ' ') ++j;
  const int level = word_at(j, kLevels);
  if (level < 0) return false;
  j = s.find(':', j) + 1;
  if (j + 2 > s.size() || s[j] != ' ' || s[j + 1] != '[') return false;
  j += 2;
  if (!parse_iso_prefix(s, j, out, ']')) return false;
  if (j >= s.size() || s[j++] != ':') return false;
  if (j < s.size() && s[j] == ' ') ++j;
  r.facility = facility;
  r.priority = level;
  i = j;
  return true;
}

// journalctl -o json: one object a line, every field a string ("MESSAGE" an array of bytes when
// it is not UTF-8, null when too large to show). What is read: MESSAGE, __REALTIME_TIMESTAMP
// (microseconds since the epoch), _SOURCE_MONOTONIC_TIMESTAMP (microseconds since boot),
// PRIORITY, SYSLOG_FACILITY and _TRANSPORT.
class JournalJson {
 public:
  explicit JournalJson(std::string_view s) : s_(s) {}

  // Calls field(key, value-start, value-end) for each top-level member; false when the line is
  // not one JSON object.
  template <typename Field>
  bool each(Field&& field) {
    size_t j = skip_ws(0);
    if (j >= s_.size() || s_[j] != '{') return false;
    j = skip_ws(j + 1);
    if (j < s_.size() && s_[j] == '}') return true;
    for (;;) {
      if (j >= s_.size() || s_[j] != '"') return false;
      const size_t key_end = skip_string(j);
      if (key_end == std::string_view::npos) return false;
      const std::string_view key = s_.substr(j + 1, key_end - j - 2);
      j = skip_ws(key_end);
      if (j >= s_.size() || s_[j] != ':') return false;
      j = skip_ws(j + 1);
      const size_t value_end = skip_value(j);
      if (value_end == std::string_view::npos) return false;
      field(key, j, value_end);
      j = skip_ws(value_end);
      if (j >= s_.size()) return false;
      if (s_[j] == '}') return true;
      if (s_[j] != ',') return false;
      j = skip_ws(j + 1);
    }
  }

  // A string value's text between its quotes (escapes undone into `scratch` when it has any), an
  // array of byte values as those bytes; nullopt for anything else.
  std::optional<std::string_view> text(size_t begin, size_t end, std::string& scratch) const {
    const std::string_view v = s_.substr(begin, end - begin);
    if (v.size() >= 2 && v.front() == '"') {
      const std::string_view inner = v.substr(1, v.size() - 2);
      if (inner.find('\\') == std::string_view::npos) return inner;
      return unescape(inner, scratch) ? std::optional<std::string_view>(scratch) : std::nullopt;
    }
    if (!v.empty() && v.front() == '[') {
      scratch.clear();
      size_t k = 1;
      for (;;) {
        while (k < v.size() && (v[k] == ' ' || v[k] == ',')) ++k;
        if (k >= v.size() || v[k] == ']') break;
        uint64_t byte = 0;
        if (!read_uint(v, k, byte, 3) || byte > 255) return std::nullopt;
        scratch.push_back(static_cast<char>(byte));
      }
      return std::string_view(scratch);
    }
    return std::nullopt;
  }

 private:
  size_t skip_ws(size_t j) const {
    while (j < s_.size() && (s_[j] == ' ' || s_[j] == '\t')) ++j;
    return j;
  }
  // Past the closing quote of the string at s_[j] == '"'; npos when it does not close.
  size_t skip_string(size_t j) const {
    for (++j; j < s_.size(); ++j) {
      if (s_[j] == '\\')
        ++j;
      else if (s_[j] == '"')
        return j + 1;
    }
    return std::string_view::npos;
  }
  size_t skip_value(size_t j) const {
    if (j >= s_.size()) return std::string_view::npos;
    if (s_[j] == '"') return skip_string(j);
    if (s_[j] == '[' || s_[j] == '{') {
      int depth = 0;
      for (; j < s_.size(); ++j) {
        const char c = s_[j];
        if (c == '"') {
          j = skip_string(j);
          if (j == std::string_view::npos) return j;
          --j;
        } else if (c == '[' || c == '{') {
          ++depth;
        } else if ((c == ']' || c == '}') && --depth == 0) {
          return j + 1;
        }
      }
      return std::string_view::npos;
    }
    while (j < s_.size() && s_[j] != ',' && s_[j] != '}' && s_[j] != ' ') ++j;
    return j;
  }
  static void append_utf8(std::string& out, uint32_t cp) {
    if (cp < 0x80) {
      out.push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
      out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
      out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
      out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
      out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else {
      out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
      out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
  }
  static bool hex4(std::string_view s, size_t k, uint32_t& v) {
    if (k + 4 > s.size()) return false;
    v = 0;
    for (size_t d = 0; d < 4; ++d) {
      const char c = s[k + d];
      const int x = is_digit(c)              ? c - '0'
                    : (c >= 'a' && c <= 'f') ? c - 'a' + 10
                    : (c >= 'A' && c <= 'F') ? c - 'A' + 10
                                             : -1;
      if (x < 0) return false;
      v = v * 16 + static_cast<uint32_t>(x);
    }
    return true;
  }
  static bool unescape(std::string_view in, std::string& out) {
    out.clear();
    for (size_t k = 0; k < in.size(); ++k) {
      if (in[k] != '\\') {
        out.push_back(in[k]);
        continue;
      }
      if (++k >= in.size()) return false;
      switch (in[k]) {
        case 'n': out.push_back('\n'); break;
        case 't': out.push_back('\t'); break;
        case 'r': out.push_back('\r'); break;
        case 'b': out.push_back('\b'); break;
        case 'f': out.push_back('\f'); break;
        case 'u': {
          uint32_t cp = 0;
          if (!hex4(in, k + 1, cp)) return false;
          k += 4;
          uint32_t low = 0;
          if (cp >= 0xD800 && cp <= 0xDBFF && k + 2 < in.size() && in[k + 1] == '\\' &&
              in[k + 2] == 'u' && hex4(in, k + 3, low) && low >= 0xDC00 && low <= 0xDFFF) {
            cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
            k += 6;
          }
          append_utf8(out, cp);  // a lone surrogate becomes U+FFFD in sanitize_utf8
          break;
        }
        default: out.push_back(in[k]);  // '"', '\\', '/'
      }
    }
    return true;
  }

  std::string_view s_;
};

// A journal field's decimal value ("4", "1700000000123456").
std::optional<uint64_t> decimal(std::optional<std::string_view> v) {
  if (!v || v->empty()) return std::nullopt;
  size_t k = 0;
  uint64_t out = 0;
  if (!read_uint(*v, k, out, 19) || k != v->size()) return std::nullopt;
  return out;
}

// The message of a JSON record refers into this buffer when the line holds it escaped or as
// bytes: valid until the next record this thread parses, as KmsgRecordView promises.
thread_local std::string json_message_scratch;

bool parse_journal_json(std::string_view line, KmsgRecordView& r) {
  JournalJson json(line);
  std::optional<std::string_view> message, realtime, monotonic, priority, facility, transport;
  std::string field_scratch;
  bool message_seen = false;
  const bool ok = json.each([&](std::string_view key, size_t begin, size_t end) {
    if (key == "MESSAGE") {
      message_seen = true;
      message = json.text(begin, end, json_message_scratch);
    } else if (key == "__REALTIME_TIMESTAMP") {
      realtime = json.text(begin, end, field_scratch);
    } else if (key == "_SOURCE_MONOTONIC_TIMESTAMP") {
      monotonic = json.text(begin, end, field_scratch);
    } else if (key == "PRIORITY") {
      priority = json.text(begin, end, field_scratch);
    } else if (key == "SYSLOG_FACILITY") {
      facility = json.text(begin, end, field_scratch);
    } else if (key == "_TRANSPORT") {
      transport = json.text(begin, end, field_scratch);
    }
  });
  if (!ok || !message_seen) return false;
  r.format = Format::kJournalJson;
  r.message = message.value_or(std::string_view());
  if (auto us = decimal(realtime))
    r.time = us > static_cast<uint64_t>(INT64_MAX)
                 ? kOutOfRange
                 : checked_time(static_cast<int64_t>(*us / 1000000),
                                static_cast<int64_t>(*us % 1000000));
  if (auto us = decimal(monotonic); us && *us <= static_cast<uint64_t>(INT64_MAX))
    r.boot_offset_us = static_cast<int64_t>(*us);
  if (auto p = decimal(priority); p && *p <= 7) r.priority = static_cast<int>(*p);
  if (auto f = decimal(facility); f && *f <= 23) r.facility = static_cast<int>(*f);
  // A record a process sent (syslog(3), stdout, the journal API) is not the kernel's, whatever
  // facility it claims: LOG_USER stands for it, which kernel_record() leaves out.
  constexpr int kUserFacility = 1;
  if (transport && *transport != "kernel" && r.facility <= 0) r.facility = kUserFacility;
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
    case Format::kDmesgHuman: return "dmesg-human";
    case Format::kSyslog5424: return "syslog-5424";
    case Format::kJournalJson: return "journal-json";
    case Format::kTalos: return "talos";
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
        // Only the kernel's own tag makes a host-less ISO line syslog's: a dmesg --time-format
        // iso message may begin with a device and ':' ("nvme0n1: I/O Cmd...").
        if (skip_host_and_tag(line, k, false) &&
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
    std::optional<TimePoint> t;
    if (i > 0 && parse_rfc5424(line, i, t)) {
      r.format = Format::kSyslog5424;
      r.time = t;
    }
  } else if (c0 == '{') {
    if (!parse_journal_json(line, r)) r = KmsgRecordView{};
    if (r.format == Format::kJournalJson) {
      if (r.time == kOutOfRange) return std::nullopt;
      if (r.message.size() > kMaxMessageBytes) r.message = r.message.substr(0, kMaxMessageBytes);
      return r;
    }
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
    } else if (parse_reltime_prefix(line, i, opts, t, r.reltime_delta_us)) {
      r.format = Format::kDmesgHuman;
      r.time = t;
    }
  } else if (r.format == Format::kBare && i < line.size() &&
             (is_alpha(line[i]) || static_cast<unsigned char>(line[i]) >= 0x80)) {
    // RFC 3164 ("<4>" first or not), journalctl -k and kern.log, in any locale.
    std::optional<TimePoint> t;
    size_t j = i;
    if (parse_syslog_date(line, j, opts, t) && skip_host_and_tag(line, j)) {
      r.format = Format::kSyslog;
      r.time = t;
      i = j;
    }
  }
  if (r.format == Format::kBare && i == 0 && (is_alpha(c0) || is_digit(c0))) {
    std::optional<TimePoint> t;
    size_t j = 0;
    KmsgRecordView talos;
    if (parse_talos_prefix(line, j, talos, t)) {
      r.format = Format::kTalos;
      r.facility = talos.facility;
      r.priority = talos.priority;
      r.time = t;
      i = j;
    }
  }
  // kern.log often repeats the dmesg timestamp after "kernel: ".
  if ((r.format == Format::kSyslog || r.format == Format::kSyslogIso ||
       r.format == Format::kSyslog5424) &&
      i < line.size() && line[i] == '[') {
    int64_t micros = 0;
    if (parse_dmesg_prefix(line, i, micros)) r.boot_offset_us = micros;
  }

  if (r.time == kOutOfRange) return std::nullopt;

  std::string_view msg = line.substr(std::min(i, line.size()));
  if (msg.size() > kMaxMessageBytes) msg = msg.substr(0, kMaxMessageBytes);
  r.message = msg;
  return r;
}

bool message_is_encoded(std::string_view raw_line) {
  if (raw_line.empty() || raw_line[0] != '{') return false;
  // journalctl writes `"MESSAGE" : [`; other writers leave the spaces out.
  size_t k = raw_line.find("\"MESSAGE\"");
  if (k == std::string_view::npos) return false;
  k += 9;
  while (k < raw_line.size() && (raw_line[k] == ' ' || raw_line[k] == ':')) ++k;
  return k < raw_line.size() && raw_line[k] == '[';
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
