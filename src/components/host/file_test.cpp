#include "components/host/file.h"

#include <gtest/gtest.h>

namespace gpud::components {
namespace {

std::string fixture(std::string_view sub) {
  return std::string(GPUD_SOURCE_DIR) + "/testing/fixtures/host-os/" + std::string(sub);
}

struct Harness {
  Harness(std::string root, std::vector<std::string> files) {
    config.host_root = std::move(root);
    config.files = std::move(files);
    ctx = {&config, nullptr, &metrics, false};
  }
  Config config;
  MetricRegistry metrics;
  ComponentContext ctx;
};

TEST(FileRule, MissingFilesAreCheckedUnderHostRoot) {
  host::HostFs fs(fixture("real"));
  EXPECT_EQ(missing_files(fs, {"/etc/os-release", "/etc/nope", "/proc/uptime"}),
            std::vector<std::string>{"/etc/nope"});
}

TEST(FileComponent, NothingConfiguredIsHealthy) {
  Harness h(fixture("real"), {});
  CheckResult r = FileComponent(h.ctx).check();
  EXPECT_EQ(r.health(), Health::kHealthy);
  EXPECT_EQ(r.states[0].reason, "no files to check");
}

TEST(FileComponent, AllPresentIsHealthy) {
  Harness h(fixture("real"), {"/etc/os-release", "/etc/machine-id"});
  EXPECT_EQ(FileComponent(h.ctx).check().health(), Health::kHealthy);
}

TEST(FileComponent, MissingFilesAreUnhealthy) {
  Harness h(fixture("real"), {"/etc/os-release", "/dev/nvidia0", "/dev/nvidiactl"});
  CheckResult r = FileComponent(h.ctx).check();
  EXPECT_EQ(r.health(), Health::kUnhealthy);
  EXPECT_EQ(r.states[0].reason, "files missing: /dev/nvidia0, /dev/nvidiactl");
}

}  // namespace
}  // namespace gpud::components
