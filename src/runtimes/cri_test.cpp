#include "runtimes/cri.h"

#include <gtest/gtest.h>

namespace gpud::runtimes {
namespace {

TEST(CriParse, PodsWithStatesAndTimes) {
  auto pods = parse_cri_pods(R"({"sandboxes":[{"id":"s1","name":"trainer-0","namespace":"ml",
      "uid":"u1","attempt":1,"state":"SANDBOX_READY","created_at_ns":1700000000500000000,
      "runtime_handler":""}],
    "containers":[{"id":"c1","sandbox_id":"s1","name":"main","attempt":0,"image":"busybox",
      "image_ref":"sha256:1","state":"CONTAINER_EXITED","created_at_ns":1700000001000000000}]})");
  ASSERT_TRUE(pods) << pods.error().message;
  ASSERT_EQ(pods->sandboxes.size(), 1u);
  EXPECT_EQ(pods->sandboxes[0].pod_namespace, "ml");
  EXPECT_TRUE(pods->sandboxes[0].ready());
  EXPECT_EQ(std::chrono::duration_cast<std::chrono::milliseconds>(
                pods->sandboxes[0].created.time_since_epoch())
                .count(),
            1700000000500);
  ASSERT_EQ(pods->containers.size(), 1u);
  EXPECT_EQ(pods->containers[0].sandbox_id, "s1");
  EXPECT_EQ(pods->containers[0].state, "CONTAINER_EXITED");
  EXPECT_EQ(pods->containers[0].image, "busybox");
}

TEST(CriParse, EmptyListsAndMissingFields) {
  auto pods = parse_cri_pods(R"({"sandboxes":[],"containers":[]})");
  ASSERT_TRUE(pods);
  EXPECT_TRUE(pods->sandboxes.empty());
  pods = parse_cri_pods(R"({})");
  ASSERT_TRUE(pods);
  EXPECT_TRUE(pods->containers.empty());
}

TEST(CriParse, GarbledAnswersAreErrorsThatSayWhat) {
  auto bad = parse_cri_pods("{\"sandboxes\": [");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("not a JSON object"), std::string::npos);
  bad = parse_cri_pods(R"({"sandboxes":{}})");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().message, "garbled pod listing: \"sandboxes\" is not an array");
  bad = parse_cri_pods(R"({"sandboxes":[{"id":"s","created_at_ns":"soon"}]})");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().message,
            "garbled sandbox in the pod listing: \"created_at_ns\" is not an integer");
  bad = parse_cri_pods(R"({"containers":[7]})");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().message, "garbled container in the pod listing: not an object");
  bad = parse_cri_pods(R"({"containers":[{"name":"x"}]})");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().message, "garbled container in the pod listing: no id");
  EXPECT_FALSE(parse_cri_version("[]"));
  EXPECT_FALSE(parse_cri_version(R"({"runtime_name":3})"));
}

TEST(CriParse, PodResources) {
  auto pods = parse_pod_resources(R"({"pod_resources":[{"name":"p","namespace":"n",
      "containers":[{"name":"c","devices":[{"resource_name":"nvidia.com/gpu",
      "device_ids":["GPU-1","GPU-2"]}],"cpu_ids":[1]}]}]})");
  ASSERT_TRUE(pods) << pods.error().message;
  ASSERT_EQ(pods->size(), 1u);
  EXPECT_EQ((*pods)[0].containers[0].devices[0].device_ids,
            (std::vector<std::string>{"GPU-1", "GPU-2"}));
  auto bad = parse_pod_resources(
      R"({"pod_resources":[{"containers":[{"devices":[{"device_ids":[1]}]}]}]})");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().message,
            "garbled devices in the pod-resources listing: a device id is not a string");
}

}  // namespace
}  // namespace gpud::runtimes
