// Replays every input checked in under fuzz/regressions/<target>/ (the crash reproducers, and a few
// inputs each fuzz target found) through that target's harness, in the ordinary build: `make test`
// and `make test-asan` run them without clang or libFuzzer. Each harness is compiled here with its
// entry point renamed to <target>_one_input (CMakeLists.txt); a crash fails the test.

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#define GPUD_FUZZ_TARGET(name) extern "C" int name##_one_input(const uint8_t*, size_t);
#include "fuzz_targets.inc"
#undef GPUD_FUZZ_TARGET

namespace {

struct Target {
  const char* name;
  int (*one_input)(const uint8_t*, size_t);
};

const Target kTargets[] = {
#define GPUD_FUZZ_TARGET(name) {#name, name##_one_input},
#include "fuzz_targets.inc"
#undef GPUD_FUZZ_TARGET
};

class FuzzRegressions : public testing::TestWithParam<Target> {};

TEST_P(FuzzRegressions, EveryCheckedInInputReplays) {
  const std::filesystem::path dir =
      std::filesystem::path(GPUD_SOURCE_DIR) / "fuzz" / "regressions" / GetParam().name;
  ASSERT_TRUE(std::filesystem::is_directory(dir)) << dir << ": a target without regression inputs";
  size_t replayed = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    std::ifstream in(entry.path(), std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    SCOPED_TRACE(entry.path().string());
    EXPECT_EQ(GetParam().one_input(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()),
              0);
    ++replayed;
  }
  EXPECT_GT(replayed, 0U) << dir;
}

INSTANTIATE_TEST_SUITE_P(Targets, FuzzRegressions, testing::ValuesIn(kTargets),
                         [](const testing::TestParamInfo<Target>& info) {
                           return std::string(info.param.name);
                         });

}  // namespace
