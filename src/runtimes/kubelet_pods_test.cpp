// The kubelet's /pods document read as a stream (parse_pod_list) against the recorded-format
// fixture (testing/fixtures/kubelet/pods.json) and garbled or oversized documents. The client's
// trust rules (root's socket, a verified certificate, one deadline) are tested through the kubelet
// component, against local servers (src/components/containers/kubelet_test.cpp).
#include "runtimes/kubelet_pods.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

namespace gpud::runtimes {
namespace {

std::string fixture() {
  std::ifstream in(std::string(GPUD_SOURCE_DIR) + "/testing/fixtures/kubelet/pods.json");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(KubeletPodList, FixtureParsesPodsPhasesAndRestarts) {
  auto pods = parse_pod_list(fixture());
  ASSERT_TRUE(pods) << pods.error().message;
  ASSERT_EQ(pods->size(), 4U);
  const KubeletPod& train = (*pods)[0];
  EXPECT_EQ(train.name, "llm-train-0");
  EXPECT_EQ(train.pod_namespace, "ml");
  EXPECT_EQ(train.uid, "0d8a4c1e-7b2f-4c3d-9e8f-1a2b3c4d5e6f");
  EXPECT_EQ(train.phase, "Running");
  ASSERT_EQ(train.containers.size(), 3U);  // the init container first
  EXPECT_TRUE(train.containers[0].init);
  EXPECT_EQ(train.containers[0].state, "terminated");
  EXPECT_EQ(train.containers[0].reason, "Completed");
  const KubeletContainer& trainer = train.containers[2];
  EXPECT_EQ(trainer.name, "trainer");
  EXPECT_EQ(trainer.id, "4f1d2c3b4a5968778695a4b3c2d1e0f00112233445566778899aabbccddeeff0");
  EXPECT_EQ(trainer.runtime, "containerd");
  EXPECT_EQ(trainer.restart_count, 2);
  EXPECT_EQ(trainer.state, "running");
  EXPECT_TRUE(trainer.ready);
  EXPECT_EQ((*pods)[2].containers[0].reason, "CrashLoopBackOff");
  EXPECT_EQ((*pods)[2].containers[0].restart_count, 7);
  EXPECT_EQ((*pods)[3].phase, "Pending");
  EXPECT_EQ((*pods)[3].containers[0].id, "");  // not created yet
  // The directory gets every container with an id (the pending one has none).
  auto listed = kubelet_containers(*pods);
  EXPECT_EQ(listed.size(), 5U);
  EXPECT_EQ(listed[2].id, trainer.id);
  EXPECT_EQ(listed[2].pod_name, "llm-train-0");
  EXPECT_EQ(listed[2].pod_uid, "0d8a4c1e-7b2f-4c3d-9e8f-1a2b3c4d5e6f");
  EXPECT_EQ(listed[2].source, "kubelet");
}

TEST(KubeletPodList, GarbledDocumentsAreErrorsNamingWhy) {
  EXPECT_NE(
      parse_pod_list("{\"kind\":\"PodList\",\"items\":[{\"metad").error().message.find("not JSON"),
      std::string::npos);
  EXPECT_NE(parse_pod_list("[1,2]").error().message.find("not an object"), std::string::npos);
  EXPECT_NE(parse_pod_list("{\"kind\":\"Status\"}").error().message.find("no items"),
            std::string::npos);
  EXPECT_FALSE(parse_pod_list("{\"items\":{}}"));
  EXPECT_FALSE(parse_pod_list("{\"items\":[42]}"));
  EXPECT_NE(parse_pod_list("{\"items\":[{\"metadata\":{\"name\":7}}]}")
                .error()
                .message.find("without a name"),
            std::string::npos);
  // Odd types inside a pod are skipped, not thrown on.
  auto odd = parse_pod_list(
      "{\"items\":[{\"metadata\":{\"name\":\"p\"},\"status\":{\"phase\":3,\"containerStatuses\":"
      "[{\"name\":\"c\",\"restartCount\":\"x\",\"ready\":\"yes\",\"state\":[]},7]}}]}");
  ASSERT_TRUE(odd);
  ASSERT_EQ(odd->at(0).containers.size(), 1U);
  EXPECT_EQ(odd->at(0).containers[0].restart_count, 0);
  EXPECT_EQ(odd->at(0).phase, "");
  auto empty = parse_pod_list("{\"kind\":\"PodList\",\"apiVersion\":\"v1\",\"items\":null}");
  ASSERT_TRUE(empty);
  EXPECT_TRUE(empty->empty());
}

TEST(KubeletPodList, MorePodsOrContainersThanANodeRunsAreRefused) {
  auto list_of = [](size_t pods, size_t containers_per_pod) {
    std::string containers;
    for (size_t c = 0; c < containers_per_pod; ++c)
      containers += (c == 0 ? "" : ",") + std::string("{\"name\":\"c\"}");
    std::string out = "{\"kind\":\"PodList\",\"items\":[";
    for (size_t i = 0; i < pods; ++i)
      out += (i == 0 ? "" : ",") + fmt::format(
                                       "{{\"metadata\":{{\"name\":\"p{}\"}},\"status\":{{"
                                       "\"containerStatuses\":[{}]}}}}",
                                       i, containers);
    return out + "]}";
  };
  auto fits = parse_pod_list(list_of(kKubeletMaxPods, 1));
  ASSERT_TRUE(fits) << fits.error().message;
  EXPECT_EQ(fits->size(), kKubeletMaxPods);
  auto over = parse_pod_list(list_of(kKubeletMaxPods + 1, 1));
  ASSERT_FALSE(over);
  EXPECT_NE(over.error().message.find("lists more than 1000 pods"), std::string::npos)
      << over.error().message;
  auto crowded = parse_pod_list(list_of(2, kKubeletMaxContainers / 2 + 1));
  ASSERT_FALSE(crowded);
  EXPECT_NE(crowded.error().message.find("more than 10000 containers"), std::string::npos);
  // Nesting deeper than any pod is refused without recursion.
  auto deep = parse_pod_list("{\"items\":[{\"metadata\":" + std::string(100000, '[') +
                             std::string(100000, ']') + "}]}");
  ASSERT_FALSE(deep);
  EXPECT_NE(deep.error().message.find("nested deeper"), std::string::npos);
}

}  // namespace
}  // namespace gpud::runtimes
