#include "kmsg/parser.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <ctime>
#include <optional>
#include <string>

#include "core/time_util.h"

namespace gpud::kmsg {
namespace {

const TimePoint kBoot = from_unix_seconds(1700000000);

// dmesg -T and syslog dates are read in the process's zone: each test that reads one says which.
class ScopedTz {
 public:
  explicit ScopedTz(const char* zone) {
    if (const char* old = std::getenv("TZ")) old_ = old;
    ::setenv("TZ", zone, 1);
    ::tzset();
  }
  ~ScopedTz() {
    if (old_)
      ::setenv("TZ", old_->c_str(), 1);
    else
      ::unsetenv("TZ");
    ::tzset();
  }

 private:
  std::optional<std::string> old_;
};

TEST(KmsgParser, RawKmsgRecord) {
  auto r = parse_line("6,1234,5678901,-;NVRM: hello", {kBoot, 0, {}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->format, Format::kRawKmsg);
  EXPECT_EQ(r->priority, 6);
  EXPECT_EQ(r->seq, 1234u);
  EXPECT_EQ(r->message, "NVRM: hello");
  EXPECT_EQ(*r->time, kBoot + std::chrono::microseconds(5678901));
  auto f = parse_line("43,7,1,c;syslog facility", {kBoot, 0, {}});
  EXPECT_EQ(f->facility, 5);
  EXPECT_EQ(f->priority, 3);
}

TEST(KmsgParser, ContinuationAndEmptyLinesCarryNoRecord) {
  EXPECT_FALSE(parse_line(" SUBSYSTEM=pci"));
  EXPECT_FALSE(parse_line(" DEVICE=+pci:0000:05:00.0"));
  EXPECT_FALSE(parse_line(""));
  EXPECT_FALSE(parse_line("\r"));
}

TEST(KmsgParser, Dmesg) {
  auto r = parse_line("[  123.456789] msg here", {kBoot, 0, {}});
  EXPECT_EQ(r->format, Format::kDmesg);
  EXPECT_EQ(r->message, "msg here");
  EXPECT_EQ(*r->time, kBoot + std::chrono::microseconds(123456789));
  EXPECT_FALSE(parse_line("[  1.5] no boot time")->time);
}

TEST(KmsgParser, DmesgCtime) {
  ScopedTz utc("UTC");
  auto r = parse_line("[Mon Jan  1 00:00:05 2024] msg");
  EXPECT_EQ(r->format, Format::kDmesgCtime);
  EXPECT_EQ(r->message, "msg");
  EXPECT_EQ(to_unix_seconds(*r->time), 1704067205);
}

TEST(KmsgParser, DmesgIso) {
  auto r = parse_line("2024-01-01T01:00:00,123456+01:00 msg x");
  EXPECT_EQ(r->format, Format::kDmesgIso);
  EXPECT_EQ(r->message, "msg x");
  EXPECT_EQ(to_unix_ms(*r->time), 1704067200123);
}

TEST(KmsgParser, SyslogAndJournal) {
  ScopedTz utc("UTC");
  auto r = parse_line("Jan 01 00:00:00 host kernel: msg a", {std::nullopt, 2024, {}});
  EXPECT_EQ(r->format, Format::kSyslog);
  EXPECT_EQ(r->message, "msg a");
  EXPECT_EQ(to_unix_seconds(*r->time), 1704067200);
  auto s = parse_line("Feb  3 04:05:06 gpu-7 kernel: [  12.000] msg b", {std::nullopt, 2024, {}});
  EXPECT_EQ(s->message, "msg b");
  auto iso = parse_line("2024-01-01T00:00:00.123456+00:00 host kernel: msg c");
  EXPECT_EQ(iso->format, Format::kSyslogIso);
  EXPECT_EQ(iso->message, "msg c");
}

// 2026-12-06T22:21:52Z, the date of the prefix tests below.
constexpr int64_t kDec6 = 1796595712;

// RFC 3164 and journalctl lines with the host name left out (rsyslog's "%timestamp% %syslogtag%"
// templates, some containers' syslog): the kernel's tag alone follows the date.
TEST(KmsgParser, SyslogWithoutHostName) {
  ScopedTz utc("UTC");
  auto r = parse_line("Dec  6 22:21:52 kernel: NVRM: Xid (PCI:0000:3b:00): 79, x",
                      {std::nullopt, 2026, {}});
  ASSERT_TRUE(r && r->time);
  EXPECT_EQ(r->format, Format::kSyslog);
  EXPECT_EQ(r->message, "NVRM: Xid (PCI:0000:3b:00): 79, x");
  EXPECT_EQ(to_unix_seconds(*r->time), kDec6);
  auto tagged = parse_line("Dec  6 22:21:52 systemd[1]: Started x.", {std::nullopt, 2026, {}});
  EXPECT_EQ(tagged->message, "Started x.");
  auto iso = parse_line("2026-12-06T22:21:52.5+00:00 kernel: msg: with colon");
  ASSERT_TRUE(iso && iso->time);
  EXPECT_EQ(iso->format, Format::kSyslogIso);
  EXPECT_EQ(iso->message, "msg: with colon");
  EXPECT_EQ(to_unix_ms(*iso->time), kDec6 * 1000 + 500);
  // dmesg --time-format iso: a message that begins with a device and ':' keeps it.
  auto dev = parse_line("2026-12-06T22:21:52,000000+00:00 nvme0n1: I/O Cmd(0x2) @ LBA 0");
  EXPECT_EQ(dev->format, Format::kDmesgIso);
  EXPECT_EQ(dev->message, "nvme0n1: I/O Cmd(0x2) @ LBA 0");
}

// "<PRI>" before an RFC 3164 date, and RFC 5424 records with and without structured data, a
// byte-order mark, a nil timestamp; the priority says the facility (kern 0, user 1).
TEST(KmsgParser, SyslogProtocolForms) {
  ScopedTz utc("UTC");
  auto bsd = parse_line("<4>Dec  6 22:21:52 gpu-7 kernel: msg a", {std::nullopt, 2026, {}});
  ASSERT_TRUE(bsd && bsd->time);
  EXPECT_EQ(bsd->format, Format::kSyslog);
  EXPECT_EQ(bsd->priority, 4);
  EXPECT_EQ(bsd->facility, 0);
  EXPECT_EQ(bsd->message, "msg a");
  EXPECT_EQ(to_unix_seconds(*bsd->time), kDec6);
  auto r = parse_line("<4>1 2026-12-06T22:21:52.123456+00:00 gpu-7 kernel - - - msg b");
  ASSERT_TRUE(r && r->time);
  EXPECT_EQ(r->format, Format::kSyslog5424);
  EXPECT_EQ(r->message, "msg b");
  EXPECT_EQ(to_unix_ms(*r->time), kDec6 * 1000 + 123);
  auto sd = parse_line(
      "<3>1 2026-12-06T23:21:52+01:00 gpu-7 kernel - - [meta sequenceId=\"7\" x=\"a\\]b\"]"
      "[origin ip=\"10.0.0.1\"] \xEF\xBB\xBFmsg c");
  ASSERT_TRUE(sd && sd->time);
  EXPECT_EQ(sd->message, "msg c");
  EXPECT_EQ(sd->priority, 3);
  EXPECT_EQ(to_unix_seconds(*sd->time), kDec6);
  auto nil = parse_line("<14>1 - - app 42 - - msg d");
  EXPECT_EQ(nil->format, Format::kSyslog5424);
  EXPECT_EQ(nil->facility, 1);
  EXPECT_FALSE(nil->time);
  EXPECT_EQ(nil->message, "msg d");
  // Not the shape: the whole line after the priority stays the message.
  EXPECT_EQ(parse_line("<4>1 not a record")->message, "1 not a record");
}

// dmesg -H: a minute's first line names it ("%b%e %H:%M": "[Dec 6 ...]", "[Dec16 ...]"), the
// next ones give the time since the line before, which dates nothing on its own.
TEST(KmsgParser, DmesgHumanReadable) {
  ScopedTz utc("UTC");
  auto r = parse_line("[Dec 6 22:21] NVRM: Xid (PCI:0000:3b:00): 79, x", {std::nullopt, 2026, {}});
  ASSERT_TRUE(r && r->time);
  EXPECT_EQ(r->format, Format::kDmesgHuman);
  EXPECT_EQ(r->message, "NVRM: Xid (PCI:0000:3b:00): 79, x");
  EXPECT_EQ(to_unix_seconds(*r->time), kDec6 - 52);
  auto late = parse_line("[Dec16 22:21] msg", {std::nullopt, 2026, {}});
  ASSERT_TRUE(late && late->time);
  EXPECT_EQ(to_unix_seconds(*late->time), kDec6 - 52 + 10 * 86400);
  auto delta = parse_line("[  +0.000123] msg");
  EXPECT_EQ(delta->format, Format::kDmesgHuman);
  EXPECT_EQ(delta->message, "msg");
  EXPECT_FALSE(delta->time);
  EXPECT_FALSE(delta->boot_offset_us);
  EXPECT_EQ(parse_line("[ +12.345678] msg")->message, "msg");
  EXPECT_EQ(parse_line("[Dec 6 22:2] msg")->format, Format::kBare);
}

// journalctl -o short-precise keeps the microseconds.
TEST(KmsgParser, JournalShortPreciseKeepsMicroseconds) {
  ScopedTz utc("UTC");
  auto r = parse_line("Dec 06 22:21:52.123456 gpu-7 kernel: msg", {std::nullopt, 2026, {}});
  ASSERT_TRUE(r && r->time);
  EXPECT_EQ(r->format, Format::kSyslog);
  EXPECT_EQ(
      std::chrono::duration_cast<std::chrono::microseconds>(r->time->time_since_epoch()).count(),
      kDec6 * 1000000 + 123456);
}

// journalctl -o json: the message as a string (escaped or not) or as bytes, the time from
// __REALTIME_TIMESTAMP, the offset since boot from _SOURCE_MONOTONIC_TIMESTAMP; a record a
// process sent is not the kernel's.
TEST(KmsgParser, JournalJson) {
  const std::string head =
      R"({ "__CURSOR" : "s=1;i=2", "__REALTIME_TIMESTAMP" : "1796595712123456", )"
      R"("_SOURCE_MONOTONIC_TIMESTAMP" : "1005030000", "PRIORITY" : "4", )"
      R"("SYSLOG_FACILITY" : "0", "_TRANSPORT" : "kernel", )";
  auto r = parse_line(head + R"("MESSAGE" : "NVRM: Xid (PCI:0000:3b:00): 79, x" })");
  ASSERT_TRUE(r && r->time);
  EXPECT_EQ(r->format, Format::kJournalJson);
  EXPECT_EQ(r->message, "NVRM: Xid (PCI:0000:3b:00): 79, x");
  EXPECT_EQ(
      std::chrono::duration_cast<std::chrono::microseconds>(r->time->time_since_epoch()).count(),
      kDec6 * 1000000 + 123456);
  EXPECT_EQ(r->boot_offset_us, 1005030000);
  EXPECT_EQ(r->priority, 4);
  EXPECT_EQ(r->facility, 0);
  auto escaped = parse_line(head + R"("MESSAGE" : "a \"quoted\" path\\x \u00e9\ud83d\ude00" })");
  EXPECT_EQ(escaped->message, "a \"quoted\" path\\x \xC3\xA9\xF0\x9F\x98\x80");
  auto bytes = parse_line(head + R"("MESSAGE" : [ 78, 86, 82, 77, 58, 32, 255 ] })");
  EXPECT_EQ(bytes->message, "NVRM: \xEF\xBF\xBD");
  auto compact = parse_line(
      R"({"MESSAGE":"m","_TRANSPORT":"syslog","SYSLOG_FACILITY":"0","__REALTIME_TIMESTAMP":"1"})");
  EXPECT_EQ(compact->message, "m");
  EXPECT_EQ(compact->facility, 1);  // a process's, whatever facility it claimed
  EXPECT_EQ(parse_line(R"({"MESSAGE":null})")->message, "");
  // Not a journal record: the line is the message.
  EXPECT_EQ(parse_line(R"({"msg": "x"})")->format, Format::kBare);
  EXPECT_EQ(parse_line(R"({"MESSAGE": "unterminated)")->format, Format::kBare);
  EXPECT_TRUE(message_is_encoded(head + R"("MESSAGE" : [ 78 ] })"));
  EXPECT_TRUE(message_is_encoded(R"({"MESSAGE":[78]})"));
  EXPECT_FALSE(message_is_encoded(head + R"("MESSAGE" : "[78]" })"));
  EXPECT_FALSE(message_is_encoded(R"(x {"MESSAGE":[78]})"));
}

// strftime's %b and %a in the log's locale: journalctl and dmesg -T in German or French.
TEST(KmsgParser, MonthNamesOfOtherLocales) {
  ScopedTz utc("UTC");
  const ParseOptions y2026{std::nullopt, 2026, {}};
  for (const char* line :
       {"Dez 06 22:21:52 gpu-7 kernel: msg", "déc. 06 22:21:52 gpu-7 kernel: msg",
        "dic  6 22:21:52 gpu-7 kernel: msg", "DEC 06 22:21:52 gpu-7 kernel: msg",
        "[So Dez  6 22:21:52 2026] msg", "[dim. déc.  6 22:21:52 2026] msg"}) {
    auto r = parse_line(line, y2026);
    ASSERT_TRUE(r && r->time) << line;
    EXPECT_EQ(r->message, "msg") << line;
    EXPECT_EQ(to_unix_seconds(*r->time), kDec6) << line;
  }
  auto march = parse_line("Mär 03 04:05:06 gpu-7 kernel: msg", y2026);
  ASSERT_TRUE(march && march->time);
  EXPECT_EQ(to_unix_seconds(*march->time), 1772510706);  // 2026-03-03T04:05:06Z
  EXPECT_EQ(to_unix_seconds(*parse_line("févr. 03 04:05:06 h kernel: m", y2026)->time),
            1772510706 - 28 * 86400);
  EXPECT_EQ(parse_line("Foo 03 04:05:06 gpu-7 kernel: msg", y2026)->format, Format::kBare);
}

// Talos (talosctl dmesg): facility, padded level, an RFC 3339 stamp in nanoseconds, perhaps the
// node first.
TEST(KmsgParser, TalosPrefixes) {
  auto r = parse_line("kern: warning: [2026-12-06T22:21:52.123456789Z]: NVRM: Xid x");
  ASSERT_TRUE(r && r->time);
  EXPECT_EQ(r->format, Format::kTalos);
  EXPECT_EQ(r->message, "NVRM: Xid x");
  EXPECT_EQ(r->facility, 0);
  EXPECT_EQ(r->priority, 4);
  EXPECT_EQ(to_unix_ms(*r->time), kDec6 * 1000 + 123);
  auto node = parse_line("172.20.0.2: kern:    info: [2026-12-06T22:21:52.0Z]: msg");
  ASSERT_TRUE(node && node->time);
  EXPECT_EQ(node->format, Format::kTalos);
  EXPECT_EQ(node->priority, 6);
  EXPECT_EQ(node->message, "msg");
  auto user = parse_line("user: warning: [2026-12-06T22:21:52Z]: msg");
  EXPECT_EQ(user->facility, 1);
  EXPECT_EQ(parse_line("kern: nonsense: [2026-12-06T22:21:52Z]: msg")->format, Format::kBare);
}

// A date TimePoint cannot hold rejects its line (no record), instead of overflowing into a
// wrapped time; the edges of the range still parse.
TEST(KmsgParser, DatesOutsideTheRangeRejectTheLine) {
  ScopedTz utc("UTC");
  EXPECT_FALSE(parse_line("[Mon Jan  1 00:00:05 2300] NVRM: Xid (PCI:0000:3b:00): 79, x"));
  EXPECT_FALSE(parse_line("2300-01-01T00:00:00,000000+00:00 NVRM: Xid (PCI:0000:3b:00): 79"));
  EXPECT_FALSE(parse_line("9999-12-31T23:59:59Z host kernel: msg"));
  EXPECT_FALSE(parse_line("1969-12-31T23:59:59Z host kernel: msg"));
  EXPECT_FALSE(parse_line("Jan 01 00:00:00 host kernel: msg", {std::nullopt, 2300, {}}));
  EXPECT_FALSE(parse_line("Jan 01 00:00:00 host kernel: msg", {std::nullopt, 1969, {}}));
  EXPECT_FALSE(parse_line("Jan 01 00:00:00 host kernel: msg", {std::nullopt, 2'000'000'000, {}}));
  // Monotonic stamps that take the boot time past 2262.
  const TimePoint late_boot = from_unix_seconds(kMaxUnixSeconds - 10);
  EXPECT_FALSE(parse_line("[999999999999.000000] msg", {late_boot, 0, {}}));
  EXPECT_FALSE(parse_line("6,1,99999999999999999999,-;msg", {kBoot, 0, {}}));
  EXPECT_FALSE(parse_line("6,1,18446744073709551615,-;msg", {kBoot, 0, {}}));
  EXPECT_TRUE(parse_line("[5.000000] msg", {late_boot, 0, {}}));
  auto edge = parse_line("2262-04-11T23:47:16Z host kernel: msg");
  ASSERT_TRUE(edge);
  EXPECT_EQ(to_unix_seconds(*edge->time), kMaxUnixSeconds);
  auto epoch = parse_line("[Thu Jan  1 00:00:00 1970] msg");
  ASSERT_TRUE(epoch);
  EXPECT_EQ(to_unix_seconds(*epoch->time), 0);
}

// dmesg -T and syslog print the machine's local time without a zone: read in the log's zone (the
// process's TZ, which `scan --kernel-log-tz` sets), they give the instant it was logged.
TEST(KmsgParser, LocalDatesAreReadInTheLogsZone) {
  ScopedTz new_york("EST5EDT,M3.2.0,M11.1.0");  // POSIX form: needs no tzdata
  // 09:00:05 EST (UTC-5) in winter, 09:00:05 EDT (UTC-4) in summer.
  auto winter = parse_line("[Mon Jan  1 09:00:05 2024] msg");
  ASSERT_TRUE(winter && winter->time);
  EXPECT_EQ(to_unix_seconds(*winter->time), 1704117605);  // 2024-01-01T14:00:05Z
  auto summer = parse_line("Jul  4 09:00:05 host kernel: msg", {std::nullopt, 2024, {}});
  ASSERT_TRUE(summer && summer->time);
  EXPECT_EQ(to_unix_seconds(*summer->time), 1720098005);  // 2024-07-04T13:00:05Z
  // ISO dates carry their offset: the zone does not move them.
  EXPECT_EQ(to_unix_seconds(*parse_line("2024-01-01T00:00:00Z host kernel: m")->time), 1704067200);
}

// Syslog dates have no year: now's year, unless that puts the line more than an hour ahead of
// now, when it was logged last year (a December log read in January).
TEST(KmsgParser, AYearlessDateAfterNowIsLastYear) {
  ScopedTz utc("UTC");
  ParseOptions jan;
  jan.now = from_unix_seconds(1735693200);  // 2025-01-01T01:00:00Z
  auto december = parse_line("Dec 31 23:59:00 host kernel: msg", jan);
  ASSERT_TRUE(december && december->time);
  EXPECT_EQ(to_unix_seconds(*december->time), 1735689540);  // 2024-12-31T23:59:00Z
  auto today = parse_line("Jan  1 00:30:00 host kernel: msg", jan);
  EXPECT_EQ(to_unix_seconds(*today->time), 1735691400);  // 2025-01-01T00:30:00Z
  // Within the hour of slack (a clock a little behind the log's): still this year.
  auto soon = parse_line("Jan  1 01:30:00 host kernel: msg", jan);
  EXPECT_EQ(to_unix_seconds(*soon->time), 1735695000);
}

// "[  1005.030000]" and raw /dev/kmsg stamps are kept as the offset since boot, with or without
// the boot time that makes them wall-clock times; kern.log's repeated stamp too.
TEST(KmsgParser, StampsSinceBootAreKeptWithoutTheBootTime) {
  auto d = parse_line("[ 1005.030000] NVRM: Xid");
  ASSERT_TRUE(d);
  EXPECT_FALSE(d->time);
  EXPECT_EQ(d->boot_offset_us, 1005030000);
  auto raw = parse_line("3,7,1005030000,-;NVRM: Xid", {kBoot, 0, {}});
  EXPECT_EQ(raw->boot_offset_us, 1005030000);
  EXPECT_EQ(*raw->time, kBoot + std::chrono::seconds(1005) + std::chrono::milliseconds(30));
  auto kern =
      parse_line("Feb  3 04:05:06 gpu-7 kernel: [   12.500000] msg b", {std::nullopt, 2024, {}});
  EXPECT_EQ(kern->boot_offset_us, 12500000);
  EXPECT_TRUE(kern->time);
  EXPECT_FALSE(parse_line("[Mon Jan  1 09:00:05 2024] msg")->boot_offset_us);
  EXPECT_FALSE(parse_line("NVRM: bare")->boot_offset_us);
}

TEST(KmsgParser, BareAndUnknownPrefixesKeepTheWholeLine) {
  EXPECT_EQ(parse_line("NVRM: Xid (PCI:0000:3b:00): 79, x")->message,
            "NVRM: Xid (PCI:0000:3b:00): 79, x");
  EXPECT_EQ(parse_line("[not a time] text")->message, "[not a time] text");
  EXPECT_EQ(parse_line("12,abc;text")->message, "12,abc;text");
  EXPECT_EQ(parse_line("Jan 99 foo")->format, Format::kBare);
  EXPECT_EQ(parse_line("<4>[  1.000000] prio")->priority, 4);
  EXPECT_EQ(parse_line("<4>[  1.000000] prio")->message, "prio");
}

TEST(KmsgParser, CleansBytes) {
  auto r = parse_line(std::string_view("a\0b\xff\xc3\x28 ok\r", 9));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->message,
            "a\xEF\xBF\xBD"
            "b\xEF\xBF\xBD\xEF\xBF\xBD( ok");
  EXPECT_EQ(sanitize_utf8("h\xC3\xA9llo"), "h\xC3\xA9llo");
  std::string huge(200000, 'x');
  EXPECT_EQ(parse_line(huge)->message.size(), kMaxMessageBytes);
}

}  // namespace
}  // namespace gpud::kmsg
