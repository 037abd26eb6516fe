// One kernel-log record, whatever the source (/dev/kmsg, dmesg, journalctl -k, syslog).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/health.h"

namespace gpud::kmsg {

enum class Format {
  kBare,         // no recognised prefix: the whole line is the message
  kRawKmsg,      // "6,1234,5678901,-;msg" as read from /dev/kmsg
  kDmesg,        // "[  123.456789] msg"
  kDmesgCtime,   // "[Mon Jan  1 00:00:00 2024] msg" (dmesg -T)
  kDmesgIso,     // "2024-01-01T00:00:00,123456+00:00 msg" (dmesg --time-format iso)
  kSyslog,       // "Jan 01 00:00:00 host kernel: msg" (journalctl -k, kern.log)
  kSyslogIso,    // "2024-01-01T00:00:00.123456+00:00 host kernel: msg"
  kDmesgHuman,   // "[Dec 6 22:21] msg", then "[  +0.000123] msg" (dmesg -H / --reltime)
  kSyslog5424,   // "<4>1 2024-01-01T00:00:00.123456+00:00 host kernel - - - msg" (RFC 5424)
  kJournalJson,  // journalctl -o json: {"MESSAGE":"msg","__REALTIME_TIMESTAMP":"...",...}
  kTalos,        // "kern: warning: [2024-01-01T00:00:00.123456789Z]: msg" (talosctl dmesg)
};

std::string_view to_string(Format f);

struct KmsgRecord {
  int priority = -1;  // syslog level 0 (emerg) .. 7 (debug); -1 when the line does not say
  int facility = -1;
  uint64_t seq = 0;               // /dev/kmsg sequence number (0 for other formats)
  std::optional<TimePoint> time;  // absent when the line has no usable timestamp
  // Microseconds since boot, from the "[  1005.030000]" or raw /dev/kmsg stamp; a saved log
  // carries it even when the boot time (and so `time`) is unknown.
  std::optional<int64_t> boot_offset_us;
  std::string message;  // valid UTF-8, no CR/LF, at most kMaxMessageBytes
  Format format = Format::kBare;
};

// The same, referring to the caller's line buffer: the reader's hot path uses it to avoid a copy
// per line. The message may hold invalid UTF-8 or NUL bytes; to_record() cleans it.
struct KmsgRecordView {
  int priority = -1;
  int facility = -1;
  uint64_t seq = 0;
  std::optional<TimePoint> time;
  std::optional<int64_t> boot_offset_us;
  std::string_view message;
  Format format = Format::kBare;
  // dmesg -H's "[  +0.000123]": the time since the line before. The saved-log reader dates such a
  // line from the dated line ("[Dec 6 22:21]") before it plus the deltas since.
  std::optional<int64_t> reltime_delta_us;
};

inline constexpr size_t kMaxMessageBytes = 64 * 1024;

}  // namespace gpud::kmsg
