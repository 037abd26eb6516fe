#include "host/proc_pid_stat.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace gpud::host {
namespace {

// A whole line as Linux 6.1 writes it for a process started 250 s after boot (at 100 Hz).
std::string stat_line(std::string_view pid, std::string_view comm, uint64_t start_ticks) {
  return std::string(pid) + " (" + std::string(comm) +
         ") S 1 77 77 0 -1 4194560 100 0 0 0 5 3 0 0 20 0 4 0 " + std::to_string(start_ticks) +
         " 123456 789 18446744073709551615 1 1 0 0 0 0 0 4096 0 0 0 0 17 3 0 0 0 0 0\n";
}

struct TempRoot {
  std::filesystem::path root;
  TempRoot() {
    char tmpl[] = "/tmp/gpud-procpidstat-XXXXXX";
    root = ::mkdtemp(tmpl);
  }
  ~TempRoot() { std::filesystem::remove_all(root); }
  void write(int64_t pid, const std::string& text) const {
    std::filesystem::create_directories(root / "proc" / std::to_string(pid));
    std::ofstream(root / "proc" / std::to_string(pid) / "stat") << text;
  }
};

TEST(ProcPidStat, ParsesPidCommStateAndStartTicks) {
  auto p = parse_proc_pid_stat(stat_line("1", "systemd", 25000));
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_EQ(p->pid, 1);
  EXPECT_EQ(p->comm, "systemd");
  EXPECT_EQ(p->state, 'S');
  EXPECT_EQ(p->start_ticks, 25000U);
}

TEST(ProcPidStat, CommWithSpacesAndParenthesesEndsAtLastParen) {
  auto p = parse_proc_pid_stat(stat_line("200", "my )proc (x", 7));
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_EQ(p->comm, "my )proc (x");
  EXPECT_EQ(p->state, 'S');
  EXPECT_EQ(p->start_ticks, 7U) << "fields count from the last ')'";
}

TEST(ProcPidStat, LineCutBeforeStartTimeHasNoStartTicks) {
  auto p = parse_proc_pid_stat("200 (x) D 1 200 200 0");
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_EQ(p->state, 'D');
  EXPECT_FALSE(p->start_ticks);
  auto after = started_after_boot(*p);
  ASSERT_FALSE(after);
  EXPECT_NE(after.error().message.find("stops before starttime"), std::string::npos)
      << after.error().message;
}

TEST(ProcPidStat, GarbledLinesAreErrorsNotCrashes) {
  for (std::string_view bad :
       {"", "\n", "12 (cut", "abc (x) R", "12 (x)", "12 (x)\n", "-4 (x) R", ") 12 (x R",
        "12 (x) RS 1", "(x) R", "99999999999999999999999 (x) R"}) {
    auto p = parse_proc_pid_stat(bad);
    EXPECT_FALSE(p) << "accepted \"" << bad << "\"";
  }
  // A starttime that is there but not a number.
  std::string line = stat_line("5", "x", 1);
  line.replace(line.find(" 1 123456"), 2, " z");
  auto p = parse_proc_pid_stat(line);
  ASSERT_FALSE(p);
  EXPECT_NE(p.error().message.find("starttime \"z\" is not a number"), std::string::npos)
      << p.error().message;
  // Every prefix of a real line parses or is an error.
  const std::string whole = stat_line("77", "python3 (x)", 250);
  for (size_t n = 0; n <= whole.size(); ++n) (void)parse_proc_pid_stat(whole.substr(0, n));
}

TEST(ProcPidStat, StartedAfterBootInSeconds) {
  const long hz = ::sysconf(_SC_CLK_TCK);
  auto p = parse_proc_pid_stat(stat_line("77", "python3", static_cast<uint64_t>(250 * hz)));
  ASSERT_TRUE(p);
  auto after = started_after_boot(*p);
  ASSERT_TRUE(after) << after.error().message;
  EXPECT_DOUBLE_EQ(after->count(), 250.0);
}

TEST(ProcPidStat, ReadsThroughTheHostRoot) {
  TempRoot t;
  t.write(77, stat_line("77", "python3 (x)", 1234));
  HostFs fs(t.root.string());
  auto p = read_proc_pid_stat(fs, 77);
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_EQ(p->comm, "python3 (x)");
  EXPECT_EQ(p->start_ticks, 1234U);
  auto gone = read_proc_pid_stat(fs, 78);
  EXPECT_FALSE(gone);
}

TEST(ProcPidStat, FileLongerThanTheCapIsAnError) {
  TempRoot t;
  t.write(9, stat_line("9", std::string(kProcPidStatMaxBytes, 'a'), 1));
  auto p = read_proc_pid_stat(HostFs(t.root.string()), 9);
  ASSERT_FALSE(p);
  EXPECT_NE(p.error().message.find("longer than 4096 bytes"), std::string::npos)
      << p.error().message;
  // A garbled file names its path.
  t.write(10, "garbage");
  auto g = read_proc_pid_stat(HostFs(t.root.string()), 10);
  ASSERT_FALSE(g);
  EXPECT_NE(g.error().message.find("/proc/10/stat: not a /proc/<pid>/stat line"), std::string::npos)
      << g.error().message;
}

TEST(ProcPidStat, ProcessStartTimeIsBootPlusStartTime) {
  TempRoot t;
  const long hz = ::sysconf(_SC_CLK_TCK);
  t.write(42, stat_line("42", "containerd", static_cast<uint64_t>(30 * hz)));
  // btime of /proc/stat is the boot time, in seconds since the epoch.
  std::ofstream(t.root / "proc" / "stat") << "cpu  1 2 3 4\nbtime 1764493000\n";
  auto started = process_start_time(HostFs(t.root.string()), 42);
  ASSERT_TRUE(started);
  EXPECT_EQ(Clock::to_time_t(*started), 1764493030);
  EXPECT_FALSE(process_start_time(HostFs(t.root.string()), 43));
}

}  // namespace
}  // namespace gpud::host
