#include "runtimes/attribution.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace gpud::runtimes {
namespace {

constexpr const char* kId = "4f1d2c3b4a5968778695a4b3c2d1e0f00112233445566778899aabbccddeeff0";
constexpr const char* kUid = "0d8a4c1e-7b2f-4c3d-9e8f-1a2b3c4d5e6f";

TEST(Attribution, ListedContainerGivesItsPod) {
  ContainerDirectory dir;
  dir.publish("containerd", {{kId, "trainer", "llm-train-0", "ml", kUid, "containerd"}});
  Attribution a = attribute({kId, kUid, "containerd"}, &dir);
  EXPECT_EQ(a, (Attribution{kId, "trainer", "llm-train-0", "ml", kUid, "containerd"}));
  nlohmann::json j = nlohmann::json::object();
  add_attribution(a, j);
  EXPECT_EQ(j, nlohmann::json({{"container_id", kId},
                               {"container", "trainer"},
                               {"pod", "llm-train-0"},
                               {"namespace", "ml"},
                               {"pod_uid", kUid},
                               {"attribution_source", "containerd"}}));
}

TEST(Attribution, UnlistedContainerKeepsTheCgroupIds) {
  ContainerDirectory dir;
  dir.publish("docker", {{std::string(64, 'a'), "other", "", "", "", "docker"}});
  Attribution a = attribute({kId, kUid, ""}, &dir);
  EXPECT_EQ(a, (Attribution{kId, "", "", "", kUid, "cgroup"}));
  EXPECT_EQ(attribute({kId, "", "docker"}, nullptr), (Attribution{kId, "", "", "", "", "cgroup"}));
  nlohmann::json j = nlohmann::json::object();
  add_attribution(attribute({kId, "", ""}, nullptr), j);
  EXPECT_EQ(j, nlohmann::json({{"container_id", kId}, {"attribution_source", "cgroup"}}));
}

TEST(Attribution, PodUidFindsThePodWhenTheContainerIsNotListed) {
  // The kubelet listed another container of the same pod (or the pod before this container
  // started): the pod's name and namespace still come through its uid.
  ContainerDirectory dir;
  dir.publish("kubelet", {{std::string(64, 'b'), "sidecar", "llm-train-0", "ml", kUid, "kubelet"}});
  Attribution a = attribute({kId, kUid, "containerd"}, &dir);
  EXPECT_EQ(a, (Attribution{kId, "", "llm-train-0", "ml", kUid, "kubelet"}));
}

TEST(Attribution, PidThroughTheHostRoot) {
  char tmpl[] = "/tmp/gpud-attribution-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::filesystem::path root(tmpl);
  std::filesystem::create_directories(root / "proc/77");
  std::filesystem::create_directories(root / "proc/78");
  std::ofstream(root / "proc/77/cgroup")
      << "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod"
      << "0d8a4c1e_7b2f_4c3d_9e8f_1a2b3c4d5e6f.slice/cri-containerd-" << kId << ".scope\n";
  std::ofstream(root / "proc/78/cgroup") << "0::/user.slice/session-1.scope\n";
  // comm with a space and a ')' : fields count from the last ')'.
  std::ofstream(root / "proc/77/stat")
      << "77 (python3 (x)) S 1 77 77 0 -1 4194560 100 0 0 0 5 3 0 0 20 0 4 0 "
      << 250 * sysconf(_SC_CLK_TCK) << " 123456 789 18446744073709551615\n";
  ContainerDirectory dir;
  dir.publish("containerd", {{kId, "trainer", "llm-train-0", "ml", "", "containerd"}});
  host::HostFs fs(root.string());
  auto a = attribute_pid(fs, &dir, 77);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->pod, "llm-train-0");
  EXPECT_EQ(a->pod_uid, kUid);
  EXPECT_FALSE(attribute_pid(fs, &dir, 78));  // a host process
  EXPECT_FALSE(attribute_pid(fs, &dir, 79));  // gone
  auto start = process_start_seconds(fs, 77);
  ASSERT_TRUE(start);
  EXPECT_DOUBLE_EQ(*start, 250.0);
  EXPECT_FALSE(process_start_seconds(fs, 78));               // no stat
  std::ofstream(root / "proc/78/stat") << "78 (x) S 1 2 3";  // cut short
  EXPECT_FALSE(process_start_seconds(fs, 78));
  std::filesystem::remove_all(root);
}

}  // namespace
}  // namespace gpud::runtimes
