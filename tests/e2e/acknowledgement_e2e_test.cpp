// End-to-end: set-healthy survives a daemon restart on the same kernel log and data dir; a new
// fault after it is a fault again; the acknowledged event stays listed with who acknowledged it.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <random>
#include <thread>

#include "tests/e2e/daemon_process.h"

namespace gpud::e2e {
namespace {

using namespace std::chrono_literals;
constexpr const char* kXid = "accelerator-nvidia-error-xid";

// A raw /dev/kmsg record of Xid 79 on `bus` ("0000:3b:00"), `offset_s` after boot.
std::string raw_xid(const std::string& bus, double offset_s, int seq) {
  char stamp[64];
  std::snprintf(stamp, sizeof stamp, "3,%d,%lld,-;", seq, static_cast<long long>(offset_s * 1e6));
  return std::string(stamp) + "NVRM: Xid (PCI:" + bus +
         "): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.\n";
}

double uptime_s() {
  double up = 0;
  std::ifstream("/proc/uptime") >> up;
  return up;
}

std::string xid_health(const DaemonProcess& d) {
  return component_state(d, kXid).value("health", "");
}

// The Xid component's events in /v1/events.
nlohmann::json xid_events(const DaemonProcess& d) {
  auto res = d.get(std::string("/v1/events?components=") + kXid);
  if (!res || res->status != 200) return nlohmann::json::array();
  auto doc = parse_json(res->body);
  if (!doc.is_array() || doc.empty()) return nlohmann::json::array();
  return doc[0].value("events", nlohmann::json::array());
}

TEST(AcknowledgementE2E, SetHealthySurvivesARestartAndANewXidIsAFaultAgain) {
  TempDirGuard guard{make_temp_dir()};
  const std::string dir = guard.path;
  const std::string kmsg = dir + "/kmsg";
  const std::string data = dir + "/data";
  std::random_device rd;
  char bus[16];
  std::snprintf(bus, sizeof bus, "%04x:%02x:00", 0x1000 + rd() % 0xe000, rd() % 0x100);
  // Both records lie in this boot's past (the reboot the os component records is older).
  const double first_at = std::max(1.0, uptime_s() - 120);
  { std::ofstream(kmsg) << raw_xid(bus, first_at, 1); }
  const std::vector<std::string> env{"GPUD_KMSG_PATH=" + kmsg};

  {
    DaemonProcess d(data, {}, true, env);
    ASSERT_TRUE(d.ready()) << d.log();
    ASSERT_TRUE(eventually([&] { return xid_health(d) == "Unhealthy"; }, 20s))
        << component_state(d, kXid).dump() << d.log();
    auto ack = run_gpud({"set-healthy", kXid, "--data-dir", data}, 20);
    ASSERT_EQ(ack.exit_code, 0) << ack.out;
    ASSERT_TRUE(eventually([&] { return xid_health(d) == "Healthy"; }, 10s))
        << component_state(d, kXid).dump();
    ASSERT_EQ(d.stop(), 0);
  }

  DaemonProcess again(data, {}, true, env);
  ASSERT_TRUE(again.ready()) << again.log();
  // The ring (the file) is read again from its start: the acknowledged Xid is listed, marked. (A
  // re-read whose second moved with the boot time may add a row; it is marked too.)
  auto all_acknowledged = [](const nlohmann::json& events) {
    if (events.empty()) return false;
    for (const auto& e : events)
      if (!e.contains("acknowledged")) return false;
    return true;
  };
  ASSERT_TRUE(eventually([&] { return all_acknowledged(xid_events(again)); }, 10s))
      << xid_events(again).dump();
  auto listed = xid_events(again)[0];
  EXPECT_EQ(listed["acknowledged"].value("by", ""), "local socket") << listed.dump();
  EXPECT_TRUE(listed["acknowledged"]["time"].is_string()) << listed.dump();
  // Give the follower time to finish the file, then the state must still be Healthy.
  std::this_thread::sleep_for(1500ms);
  EXPECT_EQ(xid_health(again), "Healthy") << component_state(again, kXid).dump();
  EXPECT_TRUE(all_acknowledged(xid_events(again))) << xid_events(again).dump();

  // A new Xid after the acknowledgement is a fault again.
  { std::ofstream(kmsg, std::ios::app) << raw_xid(bus, uptime_s(), 2); }
  EXPECT_TRUE(eventually([&] { return xid_health(again) == "Unhealthy"; }, 20s))
      << component_state(again, kXid).dump() << again.log();
  auto both = xid_events(again);
  int acknowledged = 0, open = 0;
  for (const auto& e : both) (e.contains("acknowledged") ? acknowledged : open) += 1;
  EXPECT_EQ(open, 1) << both.dump();
  EXPECT_GE(acknowledged, 1) << both.dump();
}

}  // namespace
}  // namespace gpud::e2e
