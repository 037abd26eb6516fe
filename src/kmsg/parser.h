// Parses one kernel-log line in any of the formats of record.h, detecting the format by itself.
// Matching never depends on recognising the timestamp: an unknown prefix leaves the whole line as
// the message.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "core/health.h"
#include "kmsg/record.h"

namespace gpud::kmsg {

struct ParseOptions {
  // Boot time: raw /dev/kmsg and plain dmesg lines carry time since boot. Without it they get
  // no time.
  std::optional<TimePoint> boot_time;
  // The year for syslog lines, which carry none. 0: the year of `now` in the log's zone, or the
  // year before when the date would be more than an hour after `now` (a December line read in
  // January).
  int year = 0;
  // "Now" for that choice (default: the clock).
  std::optional<TimePoint> now;
};

// dmesg -T and syslog dates carry no zone: they are read in the process's local zone (TZ, else
// /etc/localtime), which `gpud scan --kernel-log-tz` sets to the log's zone. ISO dates carry their
// offset and raw/dmesg stamps are since boot, so neither depends on it.

// Parses a line (without its '\n'; a trailing '\r' is stripped). nullopt for lines that carry no
// record: empty lines and /dev/kmsg continuation lines (" KEY=VALUE").
std::optional<KmsgRecordView> parse_line_view(std::string_view line, const ParseOptions& opts = {});
std::optional<KmsgRecord> parse_line(std::string_view line, const ParseOptions& opts = {});
KmsgRecord to_record(const KmsgRecordView& v);

// Whether a line carries its message in another form than its text (a journal JSON record whose
// MESSAGE is an array of bytes): a prefilter that looks for words in the raw line cannot judge it.
bool message_is_encoded(std::string_view raw_line);
// A text every line that message_is_encoded accepts holds: a prefilter's keyword for those lines.
inline constexpr std::string_view kEncodedMessageKey = "\"MESSAGE\"";

// Valid UTF-8 out of any bytes: NUL and invalid sequences become U+FFFD.
std::string sanitize_utf8(std::string_view s);
// Boot time of this machine as the kernel's monotonic clock sees it (for /dev/kmsg times).
TimePoint estimate_boot_time();

}  // namespace gpud::kmsg
