// LogTail: backlog, appended lines, a line still being written, rotation, truncation, a file that
// appears later, a long line and a FIFO.
#include "host/log_tail.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace gpud::host {
namespace {

namespace fs = std::filesystem;

struct TempDir {
  TempDir() {
    char tmpl[] = "/tmp/gpud-logtail-XXXXXX";
    path = ::mkdtemp(tmpl);
  }
  ~TempDir() { fs::remove_all(path); }
  std::string path;
};

void append(const std::string& p, const std::string& text) {
  std::ofstream(p, std::ios::app) << text;
}

std::vector<std::string> lines_of(LogTail& t) {
  auto r = t.read();
  EXPECT_TRUE(r) << r.error().message;
  return r ? r->lines : std::vector<std::string>{};
}

using V = std::vector<std::string>;

TEST(LogTail, FirstReadTakesWholeLinesOfTheBacklogThenOnlyNewLines) {
  TempDir d;
  const std::string p = d.path + "/fm.log";
  append(p, "first line is long enough to be cut\nsecond\nthird\n");
  LogTail t(p, /*backlog_bytes=*/14);  // "second\nthird\n" is 13 bytes: the cut "line\n" is not
  auto r = t.read();
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->backlog);
  EXPECT_EQ(r->lines, (V{"second", "third"}));
  EXPECT_TRUE(lines_of(t).empty());
  append(p, "fourth\r\nfif");
  auto r2 = t.read();
  ASSERT_TRUE(r2);
  EXPECT_FALSE(r2->backlog);
  EXPECT_EQ(r2->lines, V{"fourth"});
  append(p, "th\n");
  EXPECT_EQ(lines_of(t), V{"fifth"}) << "a line waits for its newline";
}

TEST(LogTail, ABacklogStartingAtALineBoundaryKeepsThatLine) {
  TempDir d;
  const std::string p = d.path + "/fm.log";
  append(p, "aaaa\nbbbb\n");
  LogTail t(p, 5);
  EXPECT_EQ(lines_of(t), V{"bbbb"});
}

TEST(LogTail, RotatedFileIsReadFromItsStartAndTruncatedFromTheNewEnd) {
  TempDir d;
  const std::string p = d.path + "/fm.log";
  append(p, "old\n");
  LogTail t(p);
  EXPECT_EQ(lines_of(t), V{"old"});
  fs::rename(p, p + ".1");
  append(p, "new 1\nnew 2\n");
  EXPECT_EQ(lines_of(t), (V{"new 1", "new 2"}));
  // copytruncate: the same inode, shorter.
  std::ofstream(p, std::ios::trunc) << "after\n";
  EXPECT_EQ(lines_of(t), V{"after"});
}

TEST(LogTail, AMissingFileIsNotAnErrorAndIsReadWholeWhenItAppears) {
  TempDir d;
  const std::string p = d.path + "/fm.log";
  LogTail t(p, 4);
  auto r = t.read();
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->missing);
  append(p, "written after the first read\nsecond\n");
  EXPECT_EQ(lines_of(t), (V{"written after the first read", "second"}))
      << "a file that appears later is new: no backlog cut";
}

TEST(LogTail, ReadsAreBoundedAndALongLineIsCut) {
  TempDir d;
  const std::string p = d.path + "/fm.log";
  LogTail t(p, 0, /*max_read=*/8, /*max_line=*/4);
  ASSERT_TRUE(t.read());  // missing
  append(p, "abcdefghij\nxy\n");
  EXPECT_EQ(lines_of(t), V{"abcd"}) << "8 bytes read, the line cut at 4";
  // The rest of the long line arrives as its own cut piece, then the next line.
  EXPECT_EQ(lines_of(t), (V{"ij", "xy"}));
  // A line that never ends is emitted once it passes max_line, not kept growing.
  append(p, std::string(20, 'z'));
  auto cut = lines_of(t);
  ASSERT_FALSE(cut.empty());
  EXPECT_EQ(cut[0], "zzzz");
}

TEST(LogTail, AFifoOrADirectoryIsAnErrorNotAHang) {
  TempDir d;
  const std::string fifo = d.path + "/fm.log";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  LogTail t(fifo);
  auto r = t.read();
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("not a regular file"), std::string::npos) << r.error().message;
  LogTail dir(d.path);
  EXPECT_FALSE(dir.read());
}

}  // namespace
}  // namespace gpud::host
