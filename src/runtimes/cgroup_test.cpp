#include "runtimes/cgroup.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

namespace gpud::runtimes {
namespace {

constexpr const char* kId = "4f1d2c3b4a5968778695a4b3c2d1e0f00112233445566778899aabbccddeeff0";
constexpr const char* kUid = "0d8a4c1e-7b2f-4c3d-9e8f-1a2b3c4d5e6f";

TEST(Cgroup, V2SystemdContainerdPod) {
  // A burstable pod's container under the systemd driver (containerd's CRI, cgroup v2).
  auto id = parse_proc_cgroup(
      "0::/kubepods.slice/kubepods-burstable.slice/"
      "kubepods-burstable-pod0d8a4c1e_7b2f_4c3d_9e8f_1a2b3c4d5e6f.slice/"
      "cri-containerd-4f1d2c3b4a5968778695a4b3c2d1e0f00112233445566778899aabbccddeeff0.scope\n");
  ASSERT_TRUE(id);
  EXPECT_EQ(id->container_id, kId);
  EXPECT_EQ(id->pod_uid, kUid);  // underscores of the slice name back to dashes
  EXPECT_EQ(id->runtime, "containerd");
}

TEST(Cgroup, V2SystemdGuaranteedPodCrio) {
  // Guaranteed pods have no QoS slice; CRI-O's scope prefix.
  auto id = parse_cgroup_path(
      "/kubepods.slice/kubepods-pod0d8a4c1e_7b2f_4c3d_9e8f_1a2b3c4d5e6f.slice/"
      "crio-4f1d2c3b4a5968778695a4b3c2d1e0f00112233445566778899aabbccddeeff0.scope");
  ASSERT_TRUE(id);
  EXPECT_EQ(id->container_id, kId);
  EXPECT_EQ(id->pod_uid, kUid);
  EXPECT_EQ(id->runtime, "crio");
}

TEST(Cgroup, CrioConmonIsNotTheContainer) {
  auto id = parse_cgroup_path(
      "/kubepods.slice/kubepods-besteffort.slice/"
      "kubepods-besteffort-pod0d8a4c1e_7b2f_4c3d_9e8f_1a2b3c4d5e6f.slice/"
      "crio-conmon-4f1d2c3b4a5968778695a4b3c2d1e0f00112233445566778899aabbccddeeff0.scope");
  ASSERT_TRUE(id);
  EXPECT_EQ(id->container_id, "");
  EXPECT_EQ(id->pod_uid, kUid);
}

TEST(Cgroup, V1CgroupfsKubepods) {
  // cgroup v1, cgroupfs driver: every hierarchy names the same container; the pod uid has dashes.
  auto id = parse_proc_cgroup(
      "12:pids:/kubepods/burstable/pod0d8a4c1e-7b2f-4c3d-9e8f-1a2b3c4d5e6f/"
      "4f1d2c3b4a5968778695a4b3c2d1e0f00112233445566778899aabbccddeeff0\n"
      "11:memory:/kubepods/burstable/pod0d8a4c1e-7b2f-4c3d-9e8f-1a2b3c4d5e6f/"
      "4f1d2c3b4a5968778695a4b3c2d1e0f00112233445566778899aabbccddeeff0\n"
      "1:name=systemd:/kubepods/burstable/pod0d8a4c1e-7b2f-4c3d-9e8f-1a2b3c4d5e6f/"
      "4f1d2c3b4a5968778695a4b3c2d1e0f00112233445566778899aabbccddeeff0\n"
      "0::/\n");
  ASSERT_TRUE(id);
  EXPECT_EQ(id->container_id, kId);
  EXPECT_EQ(id->pod_uid, kUid);
  EXPECT_EQ(id->runtime, "");
}

TEST(Cgroup, V1CgroupfsDocker) {
  auto id = parse_proc_cgroup(
      "13:rdma:/\n"
      "4:devices:/docker/4f1d2c3b4a5968778695a4b3c2d1e0f00112233445566778899aabbccddeeff0\n"
      "1:name=systemd:/docker/4f1d2c3b4a5968778695a4b3c2d1e0f00112233445566778899aabbccddeeff0\n");
  ASSERT_TRUE(id);
  EXPECT_EQ(id->container_id, kId);
  EXPECT_EQ(id->pod_uid, "");
  EXPECT_EQ(id->runtime, "docker");
}

TEST(Cgroup, V2SystemdDocker) {
  auto id = parse_proc_cgroup(
      "0::/system.slice/"
      "docker-4f1d2c3b4a5968778695a4b3c2d1e0f00112233445566778899aabbccddeeff0.scope\n");
  ASSERT_TRUE(id);
  EXPECT_EQ(id->container_id, kId);
  EXPECT_EQ(id->runtime, "docker");
}

TEST(Cgroup, InnermostContainerWins) {
  // docker inside a pod's container: the inner one runs the process.
  auto id = parse_cgroup_path(
      "/kubepods/besteffort/pod0d8a4c1e-7b2f-4c3d-9e8f-1a2b3c4d5e6f/"
      "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa/docker/"
      "4f1d2c3b4a5968778695a4b3c2d1e0f00112233445566778899aabbccddeeff0");
  ASSERT_TRUE(id);
  EXPECT_EQ(id->container_id, kId);
  EXPECT_EQ(id->runtime, "docker");
}

TEST(Cgroup, HostProcessesAreInNoContainer) {
  EXPECT_FALSE(parse_proc_cgroup("0::/user.slice/user-1000.slice/session-3.scope\n"));
  EXPECT_FALSE(parse_proc_cgroup("0::/system.slice/containerd.service\n"));
  EXPECT_FALSE(parse_proc_cgroup("0::/\n"));  // a cgroup namespace hides the path
  EXPECT_FALSE(parse_proc_cgroup("12:cpuset:/\n1:name=systemd:/init.scope\n"));
}

TEST(Cgroup, GarbledInputNamesNothing) {
  EXPECT_FALSE(parse_proc_cgroup(""));
  EXPECT_FALSE(parse_proc_cgroup("\n\n\n"));
  EXPECT_FALSE(parse_proc_cgroup("no colons here\n::\n:\n"));
  // Not a numeric hierarchy, or a path that is not absolute.
  EXPECT_FALSE(parse_proc_cgroup(
      "x::/docker/4f1d2c3b4a5968778695a4b3c2d1e0f00112233445566778899aabbccddeeff0\n"));
  EXPECT_FALSE(parse_proc_cgroup(
      "0::docker/4f1d2c3b4a5968778695a4b3c2d1e0f00112233445566778899aabbccddeeff0\n"));
  // Ids of the wrong length or with non-hex / uppercase digits.
  EXPECT_FALSE(parse_cgroup_path("/docker/4f1d2c3b"));
  EXPECT_FALSE(parse_cgroup_path(
      "/docker/4F1D2C3B4A5968778695A4B3C2D1E0F00112233445566778899AABBCCDDEEFF0"));
  EXPECT_FALSE(parse_cgroup_path(
      "/system.slice/"
      "docker-4f1d2c3b4a5968778695a4b3c2d1e0f00112233445566778899aabbccddeeffz.scope"));
  EXPECT_FALSE(parse_cgroup_path("/kubepods/burstable/podnot-a-uid"));
  EXPECT_FALSE(parse_cgroup_path("/kubepods.slice/kubepods-burstable-pod.slice"));
  EXPECT_FALSE(parse_cgroup_path(std::string(100000, '/')));
  std::string binary("0::/docker/\0\xff\xfe", 15);
  EXPECT_FALSE(parse_proc_cgroup(binary));
}

TEST(Cgroup, ReadsUnderTheHostRoot) {
  char tmpl[] = "/tmp/gpud-cgroup-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::filesystem::path root(tmpl);
  std::filesystem::create_directories(root / "proc/4242");
  std::ofstream(root / "proc/4242/cgroup") << "0::/system.slice/docker-" << kId << ".scope\n";
  host::HostFs fs(root.string());
  auto id = read_process_cgroup(fs, 4242);
  ASSERT_TRUE(id);
  ASSERT_TRUE(*id);
  EXPECT_EQ((*id)->container_id, kId);
  EXPECT_FALSE(read_process_cgroup(fs, 4243));  // gone: an error, not "no container"
  std::filesystem::remove_all(root);
}

}  // namespace
}  // namespace gpud::runtimes
