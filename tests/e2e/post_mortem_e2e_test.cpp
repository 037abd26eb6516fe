// End-to-end: `gpud scan --kernel-log` as a post-mortem. An hour of a saved log keeps every
// occurrence at its own time (the offset since boot, or a wall-clock time with --boot-time or a
// dmesg -T log read in its zone), and the report counts every Xid/SXid per GPU.

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/time_util.h"
#include "tests/e2e/daemon_process.h"

namespace gpud::e2e {
namespace {

constexpr const char* kComponents = "accelerator-nvidia-error-xid,accelerator-nvidia-error-sxid";

struct Line {
  double offset;  // seconds since boot
  std::string message;
};

// 273 lines over an hour: 270 Xid/SXid lines 13 s apart over eight GPUs and two NVSwitches (the
// same code on the same device at most every 416 s), then the last line three more times within
// three seconds, which the deduper folds and the summary counts.
std::vector<Line> an_hour_of_faults() {
  const std::vector<std::string> gpus = {"0000:18:00", "0000:2a:00", "0000:3a:00", "0000:5d:00",
                                         "0000:9a:00", "0000:ab:00", "0000:ba:00", "0000:db:00"};
  const std::vector<std::pair<int, std::string>> xids = {
      {79, "GPU has fallen off the bus."},
      {48, "An uncorrectable double bit error (DBE) has been detected on GPU."},
      {94, "Contained: CE User Channel (0x9). RST: No, D-RST: No"},
      {13, "Graphics SM Warp Exception on (GPC 1, TPC 0, SM 1): Out Of Range Address"}};
  std::vector<Line> lines;
  for (int i = 0; i < 270; ++i) {
    const double offset = 1005.03 + 13.0 * i;
    if (i % 7 == 3) {
      lines.push_back({offset, "nvidia-nvswitch" + std::to_string(i % 2) + ": SXid (PCI:0000:0" +
                                   std::to_string(5 + i % 2) +
                                   ":00.0): 20034, Fatal, Link 30 LTSSM Fault Up"});
      continue;
    }
    const auto& [code, text] = xids[(i / 8) % xids.size()];
    lines.push_back({offset, "NVRM: Xid (PCI:" + gpus[i % gpus.size()] +
                                 "): " + std::to_string(code) +
                                 ", pid=" + std::to_string(4000 + i) + ", name=python3, " + text});
  }
  const Line last = lines.back();
  for (int k = 1; k <= 3; ++k) lines.push_back({last.offset + k, last.message});
  return lines;
}

std::string dmesg_text(const std::vector<Line>& lines) {
  std::string out;
  char stamp[32];
  for (const Line& l : lines) {
    std::snprintf(stamp, sizeof stamp, "[%12.6f] ", l.offset);
    out += stamp + l.message + "\n";
  }
  return out;
}

// The same log as `dmesg -T` prints it on a machine in `zone` that booted at `boot`.
std::string dmesg_ctime_text(const std::vector<Line>& lines, TimePoint boot,
                             const std::string& zone) {
  std::optional<std::string> old;
  if (const char* tz = std::getenv("TZ")) old = tz;
  ::setenv("TZ", zone.c_str(), 1);
  ::tzset();
  std::string out;
  for (const Line& l : lines) {
    const time_t t = static_cast<time_t>(to_unix_seconds(boot) + std::floor(l.offset));
    struct tm local {};
    localtime_r(&t, &local);
    char stamp[64];
    std::strftime(stamp, sizeof stamp, "[%a %b %e %H:%M:%S %Y] ", &local);
    out += stamp + l.message + "\n";
  }
  if (old)
    ::setenv("TZ", old->c_str(), 1);
  else
    ::unsetenv("TZ");
  ::tzset();
  return out;
}

struct Scan {
  int exit_code = -1;
  std::string out;
  nlohmann::json doc;
  std::vector<nlohmann::json> events;  // of both components
  uint64_t summarised = 0;             // the summary's counts, added up
};

Scan scan(const std::string& log, std::vector<std::string> extra = {}) {
  std::vector<std::string> args{"scan",  "--kernel-log", log,        "--json", "--log-level",
                                "error", "--components", kComponents};
  args.insert(args.end(), extra.begin(), extra.end());
  auto r = run_gpud(args);
  Scan s;
  s.exit_code = r.exit_code;
  s.out = r.out;
  s.doc = nlohmann::json::parse(r.out, nullptr, false);
  if (!s.doc.is_object()) return s;
  for (const auto& c : s.doc["components"])
    for (const auto& e : c["events"]) s.events.push_back(e);
  for (const auto& o : s.doc["kernel_log_summary"]) s.summarised += o.value("count", 0ULL);
  return s;
}

std::string write_log(const std::string& dir, const std::string& name, const std::string& text) {
  const std::string path = dir + "/" + name;
  std::ofstream(path) << text;
  return path;
}

// The Xid 79 events of one GPU, as their times (seconds) from the field `key`.
std::set<int64_t> xid79_times(const Scan& s, const std::string& bus) {
  std::set<int64_t> out;
  for (const auto& e : s.events) {
    const auto& x = e["extra_info"];
    if (x.value("xid", 0) != 79 || x.value("pci_bus_id", "") != bus) continue;
    if (e.contains("time"))
      out.insert(to_unix_seconds(*parse_time(e["time"].get<std::string>())));
    else
      out.insert(static_cast<int64_t>(std::floor(x.value("boot_offset_seconds", -1.0))));
  }
  return out;
}

// The boot is unknown: every occurrence is an event at its own offset since boot, none at the
// scan's clock, and the summary per GPU adds up to every line.
TEST(PostMortemE2E, AnHourOfFaultsKeepsEveryOccurrenceAtItsOwnBootOffset) {
  TempDirGuard dir{make_temp_dir()};
  const auto lines = an_hour_of_faults();
  ASSERT_EQ(lines.size(), 273u);
  const std::string log = write_log(dir.path, "dmesg.txt", dmesg_text(lines));
  Scan s = scan(log);
  ASSERT_EQ(s.exit_code, 1) << s.out;
  ASSERT_TRUE(s.doc.is_object()) << s.out;
  EXPECT_EQ(s.events.size(), 270u) << "273 lines less the 3 repeats of one line within 3 s";
  EXPECT_EQ(s.summarised, 273u) << s.doc["kernel_log_summary"].dump();
  for (const auto& e : s.events) {
    EXPECT_FALSE(e.contains("time")) << "the scan's clock is not the fault's time: " << e.dump();
    EXPECT_TRUE(e["extra_info"].contains("boot_offset_seconds")) << e.dump();
  }
  // GPU 0000:18:00 had Xid 79 on lines 0, 32, 64, ... (line 192 is an SXid): eight times.
  EXPECT_EQ(xid79_times(s, "0000:18:00.0"),
            (std::set<int64_t>{1005, 1421, 1837, 2253, 2669, 3085, 3917, 4333}))
      << s.out;
  // The summary row of that GPU and code.
  bool found = false;
  for (const auto& o : s.doc["kernel_log_summary"]) {
    if (o["pci_bus_id"] != "0000:18:00.0" || o["code"] != 79) continue;
    found = true;
    EXPECT_EQ(o["kind"], "Xid");
    EXPECT_EQ(o["first_boot_offset_seconds"], 1005.03);
    EXPECT_EQ(o["count"], 8);
  }
  EXPECT_TRUE(found) << s.doc["kernel_log_summary"].dump();

  // The text report lists the same events, at their offsets, and the per-GPU summary.
  auto text =
      run_gpud({"scan", "--kernel-log", log, "--log-level", "error", "--components", kComponents});
  EXPECT_EQ(text.exit_code, 1) << text.out;
  EXPECT_NE(text.out.find("event boot + 1005.03 s Fatal error_xid"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("Kernel-log Xid/SXid per GPU"), std::string::npos) << text.out;
  size_t listed = 0;
  for (size_t at = text.out.find("  event "); at != std::string::npos;
       at = text.out.find("  event ", at + 1))
    ++listed;
  EXPECT_EQ(listed, s.events.size()) << "text and --json list the same events";
}

// With the boot time the offsets become wall-clock times; the same log as dmesg -T printed it in
// New York, read with --kernel-log-tz, gives the same instants.
TEST(PostMortemE2E, BootTimeOrTheLogsZoneGiveTheRightWallClockTimes) {
  TempDirGuard dir{make_temp_dir()};
  const auto lines = an_hour_of_faults();
  const TimePoint boot = from_unix_seconds(1'796'000'000);  // 2026-11-30T...Z
  const int64_t b = to_unix_seconds(boot);
  Scan with_boot = scan(write_log(dir.path, "dmesg.txt", dmesg_text(lines)),
                        {"--boot-time", format_rfc3339(boot)});
  ASSERT_EQ(with_boot.exit_code, 1) << with_boot.out;
  EXPECT_EQ(with_boot.events.size(), 270u);
  EXPECT_EQ(xid79_times(with_boot, "0000:18:00.0"),
            (std::set<int64_t>{b + 1005, b + 1421, b + 1837, b + 2253, b + 2669, b + 3085, b + 3917,
                               b + 4333}))
      << with_boot.out;

  // America/New_York from tzdata when installed; the same rule as a POSIX string otherwise.
  const std::string zone = std::filesystem::exists("/usr/share/zoneinfo/America/New_York")
                               ? "America/New_York"
                               : "EST5EDT,M3.2.0,M11.1.0";
  const std::string ctime_log =
      write_log(dir.path, "dmesg-T.txt", dmesg_ctime_text(lines, boot, zone));
  Scan in_zone = scan(ctime_log, {"--kernel-log-tz", zone});
  ASSERT_EQ(in_zone.exit_code, 1) << in_zone.out;
  EXPECT_EQ(in_zone.events.size(), 270u);
  EXPECT_EQ(xid79_times(in_zone, "0000:18:00.0"), xid79_times(with_boot, "0000:18:00.0"))
      << in_zone.out;
  EXPECT_EQ(in_zone.summarised, 273u);
  // Read as UTC, the same lines are off by the zone's five hours.
  Scan as_utc = scan(ctime_log, {"--kernel-log-tz", "UTC"});
  EXPECT_EQ(*xid79_times(as_utc, "0000:18:00.0").begin(), b + 1005 - 5 * 3600) << as_utc.out;
}

TEST(PostMortemE2E, BadTimeFlagsAreRefusedWithTheReason) {
  TempDirGuard dir{make_temp_dir()};
  const std::string log = write_log(dir.path, "dmesg.txt", dmesg_text(an_hour_of_faults()));
  auto zone = run_gpud({"scan", "--kernel-log", log, "--kernel-log-tz", "Mars/Olympus_Mons"});
  EXPECT_EQ(zone.exit_code, 2) << zone.out;
  EXPECT_NE(zone.out.find("unknown time zone"), std::string::npos) << zone.out;
  auto boot = run_gpud({"scan", "--kernel-log", log, "--boot-time", "yesterday"});
  EXPECT_EQ(boot.exit_code, 2) << boot.out;
  EXPECT_NE(boot.out.find("--boot-time \"yesterday\": not a time"), std::string::npos) << boot.out;
  auto alone = run_gpud({"scan", "--boot-time", "2026-11-30T08:00:00Z"});
  EXPECT_EQ(alone.exit_code, 2) << alone.out;
  EXPECT_NE(alone.out.find("give --kernel-log FILE"), std::string::npos) << alone.out;
}

}  // namespace
}  // namespace gpud::e2e
