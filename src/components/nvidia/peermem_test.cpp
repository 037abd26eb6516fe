#include "components/nvidia/peermem.h"

#include <gtest/gtest.h>

#include "components/nvidia/test_result.h"
#include "testing/memory_event_log.h"

namespace gpud::components {
namespace {

using testing::contains;

std::string fixture(std::string_view sub) {
  return std::string(GPUD_SOURCE_DIR) + "/testing/fixtures/infiniband/" + std::string(sub);
}

Result<std::vector<host::LoadedModule>> modules_of(std::string_view tree) {
  return host::read_loaded_modules_table(host::HostFs(fixture(tree)));
}

TEST(PeermemRule, IbCoreUsingPeermemIsHealthy) {
  auto m = modules_of("h100-ndr-healthy");
  ASSERT_TRUE(m);
  EXPECT_TRUE(peermem_status(*m).peermem_loaded);
  EXPECT_TRUE(peermem_status(*m).ib_core_uses_peermem);
  auto r = evaluate_peermem(m, true, 8, Clock::now());
  EXPECT_EQ(r.health(), Health::kHealthy);
  EXPECT_EQ(r.summary(), "ibcore successfully loaded peermem module");
  EXPECT_EQ(r.states[0].extra_info.at("ibcore_using_peermem_module"), "true");
}

TEST(PeermemRule, WithoutPeermemHealthyUnlessInfinibandPortsAreExpected) {
  auto m = modules_of("h100-ndr-no-peermem");
  ASSERT_TRUE(m);
  EXPECT_FALSE(peermem_status(*m).peermem_loaded);
  auto r = evaluate_peermem(m, false, 8, Clock::now());
  EXPECT_EQ(r.health(), Health::kHealthy);
  EXPECT_EQ(r.summary(), "ibcore is not using peermem module");
  r = evaluate_peermem(m, true, 0, Clock::now());
  EXPECT_EQ(r.health(), Health::kHealthy) << "expected but no ports: the infiniband component says";
  r = evaluate_peermem(m, true, 8, Clock::now());
  EXPECT_EQ(r.health(), Health::kDegraded);
  EXPECT_TRUE(contains(r.summary(), "while 8 InfiniBand port(s) are present and expected"))
      << r.summary();
}

TEST(PeermemRule, LoadedButUnusedAndUnreadable) {
  auto m = host::parse_proc_modules_table(
      "nvidia_peermem 16384 0 - Live 0x0\nib_core 434176 0 - Live 0x0\n");
  EXPECT_TRUE(peermem_status(m).peermem_loaded);
  EXPECT_FALSE(peermem_status(m).ib_core_uses_peermem);
  auto r = evaluate_peermem(m, false, 0, Clock::now());
  EXPECT_TRUE(contains(r.summary(), "nvidia_peermem is loaded but ib_core does not list it"));
  r = evaluate_peermem(modules_of("no-such-tree"), false, 0, Clock::now());
  EXPECT_EQ(r.health(), Health::kDegraded);
  EXPECT_TRUE(contains(r.summary(), "cannot read the loaded kernel modules")) << r.summary();
}

TEST(PeermemComponent, DegradedOnTheNodeWithoutPeermemWhenPortsAreExpected) {
  Config config;
  config.host_root = fixture("h100-ndr-no-peermem");
  config.infiniband_class_root_dir = fixture("h100-ndr-healthy/sys/class/infiniband");
  testing_support::MemoryEventLog log;
  ComponentContext ctx;
  ctx.config = &config;
  ctx.events = &log;
  PeermemComponent c(ctx);
  EXPECT_EQ(c.check().health(), Health::kHealthy);
  config.infiniband_expected_ports = 8;
  config.infiniband_expected_rate_gbps = 400;
  auto r = c.check();
  EXPECT_EQ(r.health(), Health::kDegraded);
  EXPECT_TRUE(contains(r.summary(), "while 8 InfiniBand port(s)")) << r.summary();
  config.host_root = fixture("h100-ndr-healthy");
  PeermemComponent on_healthy(ctx);
  EXPECT_EQ(on_healthy.check().health(), Health::kHealthy);
}

}  // namespace
}  // namespace gpud::components
