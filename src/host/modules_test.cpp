#include "host/modules.h"

#include <gtest/gtest.h>

namespace gpud::host {
namespace {

std::string fixture(std::string_view sub) {
  return std::string(GPUD_SOURCE_DIR) + "/testing/fixtures/host-os/" + std::string(sub);
}

TEST(ProcModules, FirstFieldOfEachLine) {
  auto m =
      parse_proc_modules("nvidia 56700928 19 nvidia_uvm, Live 0x0 (PO)\next4 1 2 - Live 0x0\n\n");
  EXPECT_EQ(m, (std::vector<std::string>{"nvidia", "ext4"}));
}

TEST(ProcModules, ReadsFixture) {
  auto m = read_loaded_modules(HostFs(fixture("modules")));
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->size(), 6u);
  EXPECT_EQ(m->front(), "nvidia_uvm");
}

TEST(ProcModules, MissingFileIsAnError) {
  EXPECT_FALSE(read_loaded_modules(HostFs(fixture("procs"))).ok());
}

TEST(ModuleName, DashesAndUnderscoresCompareEqual) {
  EXPECT_EQ(normalize_module_name("nvidia-uvm"), "nvidia_uvm");
  EXPECT_EQ(normalize_module_name(" ib_core "), "ib_core");
}

}  // namespace
}  // namespace gpud::host

namespace gpud::host {
namespace {

TEST(ProcModulesTable, UseCountAndUsers) {
  auto m = parse_proc_modules_table(
      "ib_core 434176 9 nvidia_peermem,rdma_cm,ib_uverbs, Live 0x0000000000000000 (OE)\n"
      "nvidia_peermem 16384 0 - Live 0x0000000000000000 (PO)\n"
      "leaving 100 - - Unloading 0x0\n"
      "short line\n");
  ASSERT_EQ(m.size(), 3U);
  EXPECT_EQ(m[0].name, "ib_core");
  EXPECT_EQ(m[0].use_count, 9);
  EXPECT_EQ(m[0].used_by, (std::vector<std::string>{"nvidia_peermem", "rdma_cm", "ib_uverbs"}));
  EXPECT_TRUE(m[1].used_by.empty());
  EXPECT_EQ(m[2].use_count, -1);
}

}  // namespace
}  // namespace gpud::host
