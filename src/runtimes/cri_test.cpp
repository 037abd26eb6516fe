#include "runtimes/cri.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "testing/fake_command.h"

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

TEST(CriHelperReply, RoundTripsAnswersAndErrorsWithTheirCodes) {
  auto ok = parse_cri_helper_reply(format_cri_helper_reply(GPUD_CRI_OK, R"({"sandboxes":[]})"));
  ASSERT_TRUE(ok) << ok.error().message;
  EXPECT_EQ(*ok, R"({"sandboxes":[]})");
  auto down = parse_cri_helper_reply(
      format_cri_helper_reply(GPUD_CRI_UNAVAILABLE, "cannot connect to unix:/x.sock"));
  ASSERT_FALSE(down);
  EXPECT_EQ(down.error().code, GPUD_CRI_UNAVAILABLE);
  EXPECT_EQ(down.error().message, "cannot connect to unix:/x.sock");
  auto missing = parse_cri_helper_reply(format_cri_helper_reply(kCriModuleMissing, "not in /x"));
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code, kCriModuleMissing);
  auto bare = parse_cri_helper_reply(format_cri_helper_reply(GPUD_CRI_INTERNAL, ""));
  ASSERT_FALSE(bare);
  EXPECT_EQ(bare.error().message, "gRPC status 13");
}

TEST(CriHelperReply, AnythingElseIsGarbledNeverAnAnswer) {
  for (const char* out :
       {"", "{\"sandboxes\":[]}", "gpud-cri-reply 1 0", "gpud-cri-reply 2 0\n{}",
        "gpud-cri-reply 1 x\n{}", "gpud-cri-reply 1 0x\n{}", "gpud-cri-reply 1 99\n{}",
        "gpud-cri-reply 1 -2\n{}", "gpud-cri-reply 1 \n{}"}) {
    auto r = parse_cri_helper_reply(out);
    ASSERT_FALSE(r) << out;
    EXPECT_EQ(r.error().code, GPUD_CRI_INTERNAL) << out;
    EXPECT_NE(r.error().message.find("the CRI helper's reply is garbled"), std::string::npos)
        << r.error().message;
  }
  // The child's words are shown bounded and printable.
  auto r = parse_cri_helper_reply(std::string(5000, '\x01'));
  ASSERT_FALSE(r);
  EXPECT_LT(r.error().message.size(), 300u);
  EXPECT_EQ(r.error().message.find('\x01'), std::string::npos);
}

// call_cri_helper against scripts standing in for `gpud cri-helper`.
class CriHelperCall : public ::testing::Test {
 protected:
  CriHelper helper(const std::string& body) {
    CriHelper h;
    h.executable = bin_.script("gpud", body);
    h.start_allowance = std::chrono::milliseconds(300);
    return h;
  }
  testing_support::FakeCommands bin_;
};

TEST_F(CriHelperCall, PassesTheCallAndParsesTheAnswer) {
  // The script checks its arguments: a listing only when asked as the daemon asks.
  CriHelper h = helper(
      R"([ "$1 $2 $3 $4 $5 $6" = "cri-helper list-pods --socket /run/c.sock --timeout-ms 200" ] ||
  { echo "bad arguments: $*" >&2; exit 2; }
printf 'gpud-cri-reply 1 0
{"sandboxes":[{"id":"s1","name":"p","state":"SANDBOX_READY"}]}')");
  CriClient cri(h);
  auto pods = cri.list_pods("/run/c.sock", std::chrono::milliseconds(200));
  ASSERT_TRUE(pods) << pods.error().message;
  ASSERT_EQ(pods->sandboxes.size(), 1u);
  EXPECT_EQ(pods->sandboxes[0].name, "p");
  EXPECT_TRUE(pods->sandboxes[0].ready());
  // Another socket: the script refuses, and that is the error, not an empty listing.
  auto refused = cri.list_pods("/run/other.sock", std::chrono::milliseconds(200));
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, GPUD_CRI_INTERNAL);
  EXPECT_NE(refused.error().message.find("exited with status 2 (bad arguments:"), std::string::npos)
      << refused.error().message;
}

TEST_F(CriHelperCall, TheModulesErrorKeepsItsCode) {
  CriHelper h = helper("printf 'gpud-cri-reply 1 14\ncannot connect to unix:/gone.sock'");
  auto pods = CriClient(h).list_pods("/gone.sock", std::chrono::milliseconds(200));
  ASSERT_FALSE(pods);
  EXPECT_EQ(pods.error().code, GPUD_CRI_UNAVAILABLE);
  EXPECT_EQ(pods.error().message, "cannot connect to unix:/gone.sock");
}

TEST_F(CriHelperCall, AHelperThatHangsIsKilledAtItsDeadline) {
  // It also leaves a grandchild behind: the whole process group goes.
  CriHelper h = helper("sleep 30 & sleep 30");
  const auto start = std::chrono::steady_clock::now();
  auto pods = CriClient(h).list_pods("/run/c.sock", std::chrono::milliseconds(200));
  const auto took = std::chrono::steady_clock::now() - start;
  ASSERT_FALSE(pods);
  EXPECT_EQ(pods.error().code, GPUD_CRI_DEADLINE_EXCEEDED);
  EXPECT_EQ(pods.error().message, "CRI helper timed out after 0.5 s (0.2 s for the call itself)");
  EXPECT_LT(took, std::chrono::seconds(5));
}

TEST_F(CriHelperCall, GarbageOnStdoutIsAnErrorThatSaysSo) {
  for (const char* body : {"echo '{\"sandboxes\":[]}'", "echo hello; exit 0", "exit 0",
                           "printf 'gpud-cri-reply 1 0\n{\"sandboxes\":7}'"}) {
    auto pods = CriClient(helper(body)).list_pods("/run/c.sock", std::chrono::milliseconds(200));
    ASSERT_FALSE(pods) << body;
    EXPECT_NE(pods.error().message.find("garbled"), std::string::npos) << pods.error().message;
  }
}

TEST_F(CriHelperCall, AReplyLongerThanTheCapIsRefusedWhole) {
  CriHelper h = helper(
      "printf 'gpud-cri-reply 1 0\n{\"sandboxes\":[]'; head -c 5000 /dev/zero | tr '\\0' ' ';"
      " printf '}'");
  h.max_output = 4096;
  auto pods = CriClient(h).list_pods("/run/c.sock", std::chrono::milliseconds(200));
  ASSERT_FALSE(pods);
  EXPECT_EQ(pods.error().message, "the CRI helper's reply is longer than 4096 bytes");
  // The same reply within the cap is an answer.
  h.max_output = 8192;
  auto fits = CriClient(h).list_pods("/run/c.sock", std::chrono::milliseconds(200));
  ASSERT_TRUE(fits) << fits.error().message;
  EXPECT_TRUE(fits->sandboxes.empty());
}

TEST_F(CriHelperCall, AHelperThatCannotRunIsAnError) {
  CriHelper h;
  h.executable = bin_.dir() + "/no-such-gpud";
  auto pods = CriClient(h).list_pods("/run/c.sock", std::chrono::milliseconds(200));
  ASSERT_FALSE(pods);
  EXPECT_EQ(pods.error().code, GPUD_CRI_INTERNAL);
  EXPECT_NE(pods.error().message.find("cannot run the CRI helper: "), std::string::npos)
      << pods.error().message;
  // Killed by a signal (the kernel's OOM killer, say).
  auto killed =
      CriClient(helper("kill -9 $$")).list_pods("/run/c.sock", std::chrono::milliseconds(200));
  ASSERT_FALSE(killed);
  EXPECT_NE(killed.error().message.find("was killed by a signal"), std::string::npos)
      << killed.error().message;
}

TEST(CriCall, NamesRoundTrip) {
  for (CriCall c : {CriCall::kVersion, CriCall::kListPods, CriCall::kListPodResources})
    EXPECT_EQ(parse_cri_call(cri_call_name(c)), c);
  EXPECT_FALSE(parse_cri_call("run-pod-sandbox"));
}

}  // namespace
}  // namespace gpud::runtimes
