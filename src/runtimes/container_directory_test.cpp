#include "runtimes/container_directory.h"

#include <gtest/gtest.h>

#include <thread>

namespace gpud::runtimes {
namespace {

using namespace std::chrono_literals;

TEST(ContainerDirectory, FindsByIdOrPrefixAndPrefersTheEntryWithAPod) {
  ContainerDirectory dir;
  const std::string id = "4f1d2c3b4a5968778695a4b3c2d1e0f0" + std::string(32, 'e');
  dir.publish("docker", {{id, "k8s_main", "", "", "", "docker"}});
  dir.publish("kubelet", {{id, "main", "trainer-0", "ml", "uid-1", "kubelet"}});
  auto c = dir.find(id);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->pod_name, "trainer-0");
  EXPECT_EQ(c->source, "kubelet");
  EXPECT_TRUE(dir.find(id.substr(0, 12)));
  EXPECT_FALSE(dir.find(id.substr(0, 11)));  // too short to be unique
  EXPECT_FALSE(dir.find("0123456789abcdef"));
  dir.clear("kubelet");
  EXPECT_EQ(dir.find(id)->source, "docker");
}

TEST(ContainerDirectory, DevicesMapToTheirHolderCaseInsensitively) {
  ContainerDirectory dir;
  dir.publish_devices("pod-resources",
                      {{"GPU-0b0e7a52-3c3a-5a1e-9d1c-9a1f7c2f0003", "nvidia.com/gpu", "trainer-0",
                        "ml", "main", "pod-resources"}});
  auto d = dir.find_device("gpu-0B0E7A52-3c3a-5a1e-9d1c-9a1f7c2f0003");
  ASSERT_TRUE(d);
  EXPECT_EQ(d->pod_name, "trainer-0");
  EXPECT_EQ(d->container, "main");
  EXPECT_FALSE(dir.find_device("GPU-0b0e7a52-3c3a-5a1e-9d1c-9a1f7c2f000"));
  EXPECT_FALSE(dir.find_device(""));
  dir.clear_devices("pod-resources");
  EXPECT_FALSE(dir.find_device("GPU-0b0e7a52-3c3a-5a1e-9d1c-9a1f7c2f0003"));
}

TEST(ContainerDirectory, AListingOlderThanItsMaxAgeIsNotUsed) {
  ContainerDirectory dir(std::chrono::seconds(0));
  dir.publish("docker", {{std::string(64, 'a'), "main", "", "", "", "docker"}});
  dir.publish_devices("pod-resources",
                      {{"GPU-1", "nvidia.com/gpu", "p", "ns", "c", "pod-resources"}});
  std::this_thread::sleep_for(5ms);
  EXPECT_FALSE(dir.find(std::string(64, 'a')));
  EXPECT_FALSE(dir.find_device("GPU-1"));
}

}  // namespace
}  // namespace gpud::runtimes
