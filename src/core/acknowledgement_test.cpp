#include "core/acknowledgement.h"

#include <gtest/gtest.h>

#include "core/time_util.h"

namespace gpud {
namespace {

const TimePoint kAck = from_unix_seconds(1'700'000'000);

KernelLogWatermark watermark(std::optional<int64_t> offset_us = 5'000'000) {
  return {"boot-a", offset_us, {kAck, "uid:0"}};
}

TEST(KernelLogWatermark, SameBootRecordAtOrBeforeTheOffsetIsCovered) {
  EXPECT_TRUE(covers(watermark(), {"boot-a", 4'999'999, kAck + std::chrono::hours(1)}));
  EXPECT_TRUE(covers(watermark(), {"boot-a", 5'000'000, std::nullopt}));
}

TEST(KernelLogWatermark, SameBootRecordAfterTheOffsetIsANewFault) {
  // Its wall time may even read earlier (a clock stepped back): the offset decides.
  EXPECT_FALSE(covers(watermark(), {"boot-a", 5'000'001, kAck - std::chrono::hours(1)}));
}

TEST(KernelLogWatermark, RecordOfAnotherBootIsANewFault) {
  EXPECT_FALSE(covers(watermark(), {"boot-b", 1'000, kAck - std::chrono::hours(1)}));
}

TEST(KernelLogWatermark, UnknownBootOrOffsetFallsBackToWallClock) {
  EXPECT_TRUE(covers(watermark(), {"", 9'000'000, kAck}));
  EXPECT_FALSE(covers(watermark(), {"", 1'000, kAck + std::chrono::seconds(1)}));
  EXPECT_TRUE(
      covers(watermark(std::nullopt), {"boot-a", 9'000'000, kAck - std::chrono::seconds(1)}));
  EXPECT_FALSE(covers(watermark(std::nullopt), {"boot-a", 1'000, kAck + std::chrono::seconds(1)}));
}

TEST(KernelLogWatermark, RecordWithNoTimeAtAllStaysAFault) {
  EXPECT_FALSE(covers(watermark(), {"", std::nullopt, std::nullopt}));
  EXPECT_FALSE(covers(watermark(), {"boot-a", std::nullopt, std::nullopt}));
}

TEST(KernelLogWatermark, JsonRoundTrips) {
  for (const auto& w : {watermark(), watermark(std::nullopt)}) {
    auto back = parse_kernel_log_watermark(to_json(w).dump());
    ASSERT_TRUE(back) << back.error().message;
    EXPECT_EQ(*back, w);
  }
}

TEST(KernelLogWatermark, MalformedJsonIsAnErrorNamingTheField) {
  EXPECT_FALSE(parse_kernel_log_watermark("not json"));
  auto no_time = parse_kernel_log_watermark(R"({"boot_id":"a","by":"token"})");
  ASSERT_FALSE(no_time);
  EXPECT_NE(no_time.error().message.find("time"), std::string::npos);
  EXPECT_FALSE(
      parse_kernel_log_watermark(R"({"boot_id":"a","time":1,"by":"x","boot_offset_us":"7"})"));
}

TEST(Acknowledgement, UnacknowledgedDropsAcknowledgedEvents) {
  Event a, b;
  a.name = "kept";
  b.name = "acked";
  b.acknowledged = Acknowledgement{kAck, "token"};
  auto left = unacknowledged({a, b});
  ASSERT_EQ(left.size(), 1u);
  EXPECT_EQ(left.front().name, "kept");
}

}  // namespace
}  // namespace gpud
