#include "app/api_replies.h"

#include <gtest/gtest.h>

namespace gpud::app {
namespace {

TEST(ApiReplies, HealthzMustSayOk) {
  EXPECT_TRUE(check_healthz_reply(R"({"status":"ok","version":"v1"})"));
  for (const char* bad : {"", "ok", "[]", "{}", R"({"status":1})", R"({"status":"down"})"})
    EXPECT_FALSE(check_healthz_reply(bad)) << bad;
}

TEST(ApiReplies, StatesAreCheckedFieldByField) {
  auto ok = parse_states_reply(
      R"([{"component":"cpu","states":[{"health":"Healthy","reason":"fine","name":"cpu"}]},
          {"component":"os","states":[]}])");
  ASSERT_TRUE(ok) << ok.error().message;
  EXPECT_TRUE(all_healthy(*ok));
  auto degraded = parse_states_reply(R"([{"component":"disk","states":[{"health":"Degraded"}]}])");
  ASSERT_TRUE(degraded);
  EXPECT_FALSE(all_healthy(*degraded));

  for (const char* bad : {
           "not json",
           R"({"component":"cpu"})",
           R"([1])",
           R"([{"states":[]}])",
           R"([{"component":7,"states":[]}])",
           R"([{"component":"cpu"}])",
           R"([{"component":"cpu","states":{}}])",
           R"([{"component":"cpu","states":["Healthy"]}])",
           R"([{"component":"cpu","states":[{}]}])",
           R"([{"component":"cpu","states":[{"health":5}]}])",
           R"([{"component":"cpu","states":[{"health":"Fine"}]}])",
           R"([{"component":"cpu","states":[{"health":"Healthy","reason":["x"]}]}])",
       }) {
    auto r = parse_states_reply(bad);
    ASSERT_FALSE(r) << bad;
    EXPECT_NE(r.error().message.find("not what gpud serves"), std::string::npos)
        << r.error().message;
  }
  auto named = parse_states_reply(R"([{"component":"cpu","states":[{"health":"Fine"}]}])");
  EXPECT_NE(named.error().message.find("component cpu has the unknown health \"Fine\""),
            std::string::npos)
      << named.error().message;
}

TEST(ApiReplies, SetHealthyReplyIsChecked) {
  auto ok = parse_set_healthy_reply(
      R"({"code":200,"message":"done","successful":["cpu"],"failed":{"disk":"cannot"}})");
  ASSERT_TRUE(ok) << ok.error().message;
  EXPECT_EQ(ok->message, "done");
  EXPECT_EQ(ok->successful, std::vector<std::string>{"cpu"});
  ASSERT_EQ(ok->failed.size(), 1u);
  EXPECT_EQ(ok->failed[0], (std::pair<std::string, std::string>{"disk", "cannot"}));
  for (const char* bad : {"", "[]", R"({"successful":[],"failed":{}})",
                          R"({"message":"m","successful":"cpu","failed":{}})",
                          R"({"message":"m","successful":[1],"failed":{}})",
                          R"({"message":"m","successful":[],"failed":[]})",
                          R"({"message":"m","successful":[],"failed":{"disk":false}})"})
    EXPECT_FALSE(parse_set_healthy_reply(bad)) << bad;
}

TEST(ApiReplies, ErrorMessagePrefersTheJsonMessage) {
  EXPECT_EQ(error_message(403, R"({"code":403,"message":"no"})"), "no");
  EXPECT_EQ(error_message(502, "<html>bad gateway</html>"), "HTTP 502: <html>bad gateway</html>");
  EXPECT_EQ(error_message(500, ""), "HTTP 500");
  EXPECT_EQ(error_message(500, R"({"message":3})"), R"(HTTP 500: {"message":3})");
}

}  // namespace
}  // namespace gpud::app
