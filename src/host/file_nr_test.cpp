#include "host/file_nr.h"

#include <gtest/gtest.h>

#include "host/host_fs.h"

namespace gpud::host {
namespace {

TEST(FileNr, ParsesRecordedFiles) {
  HostFs fs(std::string(GPUD_SOURCE_DIR) + "/testing/fixtures/host/fd-near-limit");
  auto nr = parse_file_nr(fs.read("/proc/sys/fs/file-nr").value_or(""));
  ASSERT_TRUE(nr.ok()) << nr.error().message;
  EXPECT_EQ(nr->allocated, 97000u);
  EXPECT_EQ(nr->unused, 0u);
  EXPECT_EQ(nr->max, 100000u);
  auto max = parse_file_max(fs.read("/proc/sys/fs/file-max").value_or(""));
  ASSERT_TRUE(max.ok());
  EXPECT_EQ(*max, 100000u);
}

TEST(FileNr, AcceptsLongMaxLimit) {
  auto nr = parse_file_nr("1234\t0\t9223372036854775807\n");
  ASSERT_TRUE(nr.ok());
  EXPECT_EQ(nr->max, 9223372036854775807ULL);
  EXPECT_EQ(*parse_file_max("9223372036854775807\n"), 9223372036854775807ULL);
}

TEST(FileNr, WrongFieldCountOrGarbageIsAnError) {
  EXPECT_FALSE(parse_file_nr("1 2").ok());
  EXPECT_FALSE(parse_file_nr("1 2 3 4").ok());
  EXPECT_FALSE(parse_file_nr("1 x 3").ok());
  EXPECT_FALSE(parse_file_max("").ok());
  EXPECT_FALSE(parse_file_max("-5").ok());
}

}  // namespace
}  // namespace gpud::host
