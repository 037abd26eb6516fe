#include "host/host_fs.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "testing/peak_rss.h"
#include "testing/temp_dir.h"

namespace gpud::host {
namespace {

std::vector<std::string> lines_of(const HostFs& fs, size_t max_bytes = 1 << 20,
                                  size_t max_line = 4096) {
  std::vector<std::string> out;
  auto r = fs.for_each_line(
      "/f", [&](std::string_view line) { out.emplace_back(line); }, max_bytes, max_line);
  EXPECT_TRUE(r.ok()) << r.error().message;
  return out;
}

TEST(HostFsForEachLine, PassesEveryLineWithoutItsNewline) {
  testing_support::TempDir root;
  ASSERT_FALSE(root.path().empty());
  root.write("f", "one\n\nthree");
  EXPECT_EQ(lines_of(HostFs(root.path())), (std::vector<std::string>{"one", "", "three"}));
}

TEST(HostFsForEachLine, LinesAcrossReadChunksAreWhole) {
  testing_support::TempDir root;
  ASSERT_FALSE(root.path().empty());
  // 10,000 lines of 13 bytes: the 64 KiB reads end inside lines.
  std::string text;
  for (int i = 0; i < 10000; ++i) text += "line-" + std::to_string(10000000 + i) + "\n";
  root.write("f", text);
  auto lines = lines_of(HostFs(root.path()));
  ASSERT_EQ(lines.size(), 10000u);
  for (int i = 0; i < 10000; ++i) ASSERT_EQ(lines[i], "line-" + std::to_string(10000000 + i));
}

TEST(HostFsForEachLine, LongLineIsCutAndTheNextOneIsWhole) {
  testing_support::TempDir root;
  ASSERT_FALSE(root.path().empty());
  root.write("f", std::string(200000, 'x') + "\nnext\n");
  auto lines = lines_of(HostFs(root.path()), 1 << 20, 100);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0], std::string(100, 'x'));
  EXPECT_EQ(lines[1], "next");
}

TEST(HostFsForEachLine, FileLongerThanTheBoundIsAnError) {
  testing_support::TempDir root;
  ASSERT_FALSE(root.path().empty());
  root.write("f", std::string(300000, '\n'));
  auto r = HostFs(root.path())
               .for_each_line(
                   "/f", [](std::string_view) {}, 200000);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("longer than 200000 bytes"), std::string::npos);
  EXPECT_FALSE(HostFs(root.path()).for_each_line("/missing", [](std::string_view) {}).ok());
}

TEST(HostFsForEachLine, FortyMegabyteFileIsReadInFlatMemory) {
  testing_support::TempDir root;
  ASSERT_FALSE(root.path().empty());
  std::string line =
      "0xffffa2d340010000-0xffffa2d340015000   20480 dup_task_struct+0x56/0x1a0 pages=4 "
      "vmalloc N0=4\n";
  std::string text;
  const size_t kLines = (40u << 20) / line.size();
  text.reserve(kLines * line.size());
  for (size_t i = 0; i < kLines; ++i) text += line;
  root.write("f", text);
  text = std::string();
  testing_support::PeakRssGrowth growth;
  ASSERT_TRUE(growth.measured());
  size_t n = 0;
  auto r = HostFs(root.path())
               .for_each_line(
                   "/f", [&](std::string_view) { ++n; }, 64u << 20);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(n, kLines);
#if !defined(GPUD_SANITIZED)
  EXPECT_LT(growth.growth_kib(), 4 * 1024);
#endif
}

}  // namespace
}  // namespace gpud::host
