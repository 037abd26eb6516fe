#include "host/os_info.h"

#include <gtest/gtest.h>

#include "core/time_util.h"

namespace gpud::host {
namespace {

std::string fixture(std::string_view sub) {
  return std::string(GPUD_SOURCE_DIR) + "/testing/fixtures/host-os/" + std::string(sub);
}

TEST(OsRelease, PrettyNameQuoted) {
  EXPECT_EQ(parse_os_release_pretty_name("NAME=\"Ubuntu\"\nPRETTY_NAME=\"Ubuntu 22.04.4 LTS\"\n"),
            "Ubuntu 22.04.4 LTS");
}

TEST(OsRelease, PrettyNameUnquotedAndSingleQuoted) {
  EXPECT_EQ(parse_os_release_pretty_name("PRETTY_NAME=Fedora\n"), "Fedora");
  EXPECT_EQ(parse_os_release_pretty_name("PRETTY_NAME='Rocky Linux 9.3'"), "Rocky Linux 9.3");
}

TEST(OsRelease, PrettyNameUnescapesShellEscapes) {
  EXPECT_EQ(parse_os_release_pretty_name(R"(PRETTY_NAME="A \"quoted\" name")"),
            "A \"quoted\" name");
}

TEST(OsRelease, MissingPrettyNameIsEmpty) {
  EXPECT_EQ(parse_os_release_pretty_name("NAME=Ubuntu\nID=ubuntu\n"), "");
  EXPECT_EQ(parse_os_release_pretty_name(""), "");
}

TEST(ProcStat, ParsesBtime) {
  EXPECT_EQ(parse_proc_stat_btime("cpu 1 2 3\nintr 5\nbtime 1704164645\nprocesses 9\n"),
            1704164645);
  EXPECT_FALSE(parse_proc_stat_btime("cpu 1 2 3\n").has_value());
  EXPECT_FALSE(parse_proc_stat_btime("btime x\n").has_value());
}

TEST(ProcUptime, ParsesFirstField) {
  EXPECT_DOUBLE_EQ(*parse_proc_uptime_seconds("568.63 525.12\n"), 568.63);
  EXPECT_FALSE(parse_proc_uptime_seconds("").has_value());
  EXPECT_FALSE(parse_proc_uptime_seconds("abc 1").has_value());
  EXPECT_FALSE(parse_proc_uptime_seconds("-5 1").has_value());
}

TEST(FileNr, FirstFieldIsAllocated) {
  EXPECT_EQ(parse_file_nr_allocated("657\t0\t2466160\n"), 657);
  EXPECT_FALSE(parse_file_nr_allocated("").has_value());
}

TEST(OsInfo, ReadsRecordedTree) {
  HostFs fs(fixture("real"));
  OsInfo info = read_os_info(fs);
  EXPECT_EQ(info.kernel_version, "6.18.44-fc-v782");
  EXPECT_EQ(info.os_image, "Debian GNU/Linux 12 (bookworm)");
  EXPECT_EQ(info.operating_system, "linux");
  EXPECT_EQ(info.hostname, "vm");
  EXPECT_EQ(info.boot_id, "ed49d400-2d9f-4fe1-93a3-0c2220a31542");
  EXPECT_EQ(info.machine_id.size(), 32u);
  ASSERT_TRUE(info.boot_time.has_value());
  EXPECT_EQ(to_unix_seconds(*info.boot_time), 1796025890);  // btime wins over uptime
  EXPECT_EQ(info.pid_max, 32768);
  EXPECT_EQ(info.file_handles_allocated, 691);
  EXPECT_EQ(info.file_max, 2466160);
  ASSERT_TRUE(info.uptime_seconds.has_value());
  EXPECT_DOUBLE_EQ(*info.uptime_seconds, 571.49);
}

TEST(OsInfo, SparseTreeLeavesMissingFieldsEmpty) {
  HostFs fs(fixture("sparse"));
  TimePoint now = from_unix_seconds(1'700'000'000);
  OsInfo info = read_os_info(fs, now);
  EXPECT_EQ(info.kernel_version, "5.15.0-105-generic");
  EXPECT_EQ(info.os_image, "");  // os-release without PRETTY_NAME
  EXPECT_EQ(info.boot_id, "");   // no /proc/sys/kernel/random/boot_id
  EXPECT_EQ(info.machine_id, "0123456789abcdef0123456789abcdef");  // /var/lib/dbus fallback
  ASSERT_TRUE(info.boot_time.has_value());                         // no btime: now - uptime
  EXPECT_EQ(to_unix_seconds(*info.boot_time), 1'700'000'000 - 12346);
  EXPECT_EQ(info.file_handles_allocated, 2048);
}

TEST(OsInfo, MissingRootReadsNothing) {
  HostFs fs(fixture("does-not-exist"));
  OsInfo info = read_os_info(fs);
  EXPECT_EQ(info.kernel_version, "");
  EXPECT_FALSE(info.boot_time.has_value());
  EXPECT_FALSE(info.pid_max.has_value());
  EXPECT_EQ(info.operating_system, "linux");
}

}  // namespace
}  // namespace gpud::host
