// The container source against a stand-in for `gpud cri-helper` (a script answering what a file
// holds) and a kubelet endpoint it refuses: what each listing does to the directory that fault
// attribution reads. docker's listing is tested against a real daemon
// (src/runtimes/docker_module/docker_module_test.cpp) and through the docker component
// (src/components/containers/docker_test.cpp); its entries in the directory here.
#include "runtimes/container_source.h"

#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <string>

#include "testing/fake_command.h"

namespace gpud::runtimes {
namespace {

using namespace std::chrono_literals;

std::string read_fixture(const std::string& name) {
  std::ifstream in(std::string(GPUD_SOURCE_DIR) + "/testing/fixtures/" + name);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// A CRI helper whose reply is the file `reply` (rewritten between calls).
class ContainerSourceTest : public ::testing::Test {
 protected:
  ContainerSourceTest()
      : reply_(bin_.dir() + "/reply"),
        source_(directory_, CriHelper{bin_.script("gpud", "cat '" + reply_ + "'"), 300ms}) {}

  void answer(int code, const std::string& text) {
    std::ofstream(reply_) << format_cri_helper_reply(code, text);
  }

  testing_support::FakeCommands bin_;
  std::string reply_;
  ContainerDirectory directory_;
  ContainerSource source_;
};

constexpr const char* kPods =
    R"({"sandboxes":[{"id":"5a5a5a5a5a5a5a5a","name":"train-0","namespace":"ml",
  "uid":"u1","state":"SANDBOX_READY"}],"containers":[{"id":"c0c0c0c0c0c0c0c0","sandbox_id":"5a5a5a5a5a5a5a5a","name":"main",
  "state":"CONTAINER_RUNNING"}]})";

TEST_F(ContainerSourceTest, AContainerdListingIsWhatAttributionFinds) {
  answer(GPUD_CRI_OK, kPods);
  auto pods = source_.containerd_pods("/run/c.sock", 200ms);
  ASSERT_TRUE(pods) << pods.error().message;
  auto c = directory_.find("c0c0c0c0c0c0c0c0");
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->name, "main");
  EXPECT_EQ(c->pod_name, "train-0");
  EXPECT_EQ(c->pod_namespace, "ml");
  EXPECT_EQ(c->pod_uid, "u1");
  EXPECT_EQ(c->source, "containerd");
  // The sandbox's own (pause) container names the pod too.
  ASSERT_TRUE(directory_.find("5a5a5a5a5a5a5a5a").has_value());
  EXPECT_EQ(directory_.find("5a5a5a5a5a5a5a5a")->pod_name, "train-0");
}

// A listing that failed with containerd still there (a deadline, a garbled answer) keeps the last
// one; nothing serving the CRI (UNAVAILABLE, UNIMPLEMENTED) or no socket at all drops it.
TEST_F(ContainerSourceTest, OnlyAGoneRuntimeDropsWhatItListed) {
  answer(GPUD_CRI_OK, kPods);
  ASSERT_TRUE(source_.containerd_pods("/run/c.sock", 200ms));
  answer(GPUD_CRI_DEADLINE_EXCEEDED, "ListPodSandbox: deadline exceeded");
  EXPECT_FALSE(source_.containerd_pods("/run/c.sock", 200ms));
  EXPECT_TRUE(directory_.find("c0c0c0c0c0c0c0c0").has_value());
  for (int gone : {GPUD_CRI_UNAVAILABLE, GPUD_CRI_UNIMPLEMENTED}) {
    answer(GPUD_CRI_OK, kPods);
    ASSERT_TRUE(source_.containerd_pods("/run/c.sock", 200ms));
    answer(gone, "cannot connect to unix:/run/c.sock");
    auto r = source_.containerd_pods("/run/c.sock", 200ms);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code, gone);
    EXPECT_FALSE(directory_.find("c0c0c0c0c0c0c0c0").has_value()) << gone;
  }
  answer(GPUD_CRI_OK, kPods);
  ASSERT_TRUE(source_.containerd_pods("/run/c.sock", 200ms));
  source_.gone(kContainerdSource);
  EXPECT_TRUE(directory_.all().empty());
}

// Device allocations are never kept past a listing that failed.
TEST_F(ContainerSourceTest, AllocationsGoWithTheListingThatStoppedShowingThem) {
  answer(GPUD_CRI_OK, R"({"pod_resources":[{"name":"train-0","namespace":"ml","containers":[
    {"name":"main","devices":[{"resource_name":"nvidia.com/gpu","device_ids":["GPU-1"]},
    {"resource_name":"example.com/nic","device_ids":["nic-0"]}]}]}]})");
  ASSERT_TRUE(source_.pod_resources("/var/lib/kubelet/pod-resources/kubelet.sock", 200ms));
  auto held = directory_.find_device("gpu-1");  // NVML and the device plugin differ in case
  ASSERT_TRUE(held.has_value());
  EXPECT_EQ(held->pod_name, "train-0");
  EXPECT_EQ(held->container, "main");
  EXPECT_EQ(held->source, "pod-resources");
  EXPECT_FALSE(directory_.find_device("nic-0").has_value());  // NVIDIA devices only
  answer(GPUD_CRI_DEADLINE_EXCEEDED, "List: deadline exceeded");
  EXPECT_FALSE(source_.pod_resources("/var/lib/kubelet/pod-resources/kubelet.sock", 200ms));
  EXPECT_FALSE(directory_.find_device("GPU-1").has_value());

  answer(GPUD_CRI_OK, R"({"pod_resources":[{"name":"p","namespace":"n","containers":[
    {"name":"c","devices":[{"resource_name":"nvidia.com/gpu","device_ids":["GPU-2"]}]}]}]})");
  ASSERT_TRUE(source_.pod_resources("/var/lib/kubelet/pod-resources/kubelet.sock", 200ms));
  source_.gone(kPodResourcesSource);
  EXPECT_FALSE(directory_.find_device("GPU-2").has_value());
}

// The kubelet not answering keeps what it listed before (its pods still run); gone() drops it.
TEST_F(ContainerSourceTest, AKubeletThatDoesNotAnswerKeepsItsLastListing) {
  directory_.publish(kKubeletSource, {{std::string(64, 'a'), "c", "p", "ns", "", "kubelet"}});
  // The authenticated port with no CA to verify it against: refused before connecting, whatever
  // listens on this machine.
  KubeletEndpoint untrusted;
  untrusted.port = 10250;
  untrusted.https = true;
  auto pods = source_.kubelet_pods(untrusted, 500ms);
  ASSERT_FALSE(pods);
  EXPECT_NE(pods.error().message.find("not trusted"), std::string::npos) << pods.error().message;
  EXPECT_TRUE(directory_.find(std::string(64, 'a')).has_value());
  source_.gone(kKubeletSource);
  EXPECT_FALSE(directory_.find(std::string(64, 'a')).has_value());
}

TEST(DockerContainerInfos, KubernetesContainersAreNamedByTheirPodSpec) {
  auto list = parse_docker_containers(read_fixture("docker/containers-20.10.json"));
  ASSERT_TRUE(list);
  auto infos = docker_container_infos(*list);
  ASSERT_EQ(infos.size(), 2u);
  EXPECT_EQ(infos[0].name, "plain-exited");
  EXPECT_EQ(infos[1].name, "trainer");
  EXPECT_EQ(infos[1].pod_name, "job-7f9c");
  EXPECT_EQ(infos[1].pod_namespace, "ml-team");
  EXPECT_EQ(infos[1].pod_uid, "0b5c2d4e-1111-2222-3333-444455556666");
  EXPECT_EQ(infos[1].source, "docker");
}

}  // namespace
}  // namespace gpud::runtimes
