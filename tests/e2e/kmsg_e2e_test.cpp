// End-to-end: the kernel-log pipeline through the real binary: /dev/kmsg -> daemon -> Xid state
// and events, `gpud scan --kernel-log`, `gpud inject-fault`, POST /inject-fault.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <sstream>
#include <thread>
#include <vector>

#include "tests/e2e/daemon_process.h"

namespace gpud::e2e {
namespace {

using Ms = std::chrono::milliseconds;
constexpr const char* kXid = "accelerator-nvidia-error-xid";

std::string fixture(const std::string& name) {
  return std::string(GPUD_SOURCE_DIR) + "/testing/fixtures/kmsg/" + name;
}

// A bus id no other test (and no real GPU) uses: tests run in parallel and share /dev/kmsg.
std::string unique_pci() {
  std::random_device rd;
  char buf[32];
  std::snprintf(buf, sizeof buf, "%04x:%02x:00.0", 0x1000 + rd() % 0xe000, rd() % 0x100);
  return buf;
}

// The component's events in /v1/events carrying this bus id.
nlohmann::json find_event(const DaemonProcess& d, const std::string& pci) {
  auto res = d.get(std::string("/v1/events?components=") + kXid);
  if (!res || res->status != 200) return nullptr;
  auto doc = parse_json(res->body);
  if (!doc.is_array()) return nullptr;
  for (const auto& c : doc)
    for (const auto& e : c.value("events", nlohmann::json::array()))
      if (e.contains("extra_info") && e["extra_info"].value("pci_bus_id", "") == pci) return e;
  return nullptr;
}

// Waits until the Xid event with `pci` is in /v1/events and the state is Unhealthy with
// REBOOT_SYSTEM; returns how long that took, or a negative duration.
Ms wait_for_xid(const DaemonProcess& d, const std::string& pci, Ms limit, nlohmann::json* event) {
  auto start = std::chrono::steady_clock::now();
  while (std::chrono::steady_clock::now() - start < limit) {
    nlohmann::json e = find_event(d, pci);
    nlohmann::json s = component_state(d, kXid);
    if (!e.is_null() && !s.is_null() && s.value("health", "") == "Unhealthy" &&
        s.contains("suggested_actions") &&
        s["suggested_actions"]
                .value("repair_actions", nlohmann::json::array())
                .dump()
                .find("REBOOT_SYSTEM") != std::string::npos) {
      *event = e;
      return std::chrono::duration_cast<Ms>(std::chrono::steady_clock::now() - start);
    }
    std::this_thread::sleep_for(Ms(50));
  }
  return Ms(-1);
}

// gpud following a private, empty kernel-log file (dir/kmsg), with POST /inject-fault enabled.
std::unique_ptr<DaemonProcess> start_with_fault_injection(const std::string& dir) {
  const std::string kmsg = dir + "/kmsg";
  { std::ofstream(kmsg).flush(); }
  return std::make_unique<DaemonProcess>(dir + "/data",
                                         std::vector<std::string>{"--enable-fault-injection"},
                                         false, std::vector<std::string>{"GPUD_KMSG_PATH=" + kmsg});
}

bool kmsg_writable() {
  int fd = ::open("/dev/kmsg", O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  ::close(fd);
  return true;
}

// Writes into the machine's real kernel log, which keeps the line until reboot: only where asked
// (GPUD_TEST_REAL_KMSG=1, set by .ci/run).
TEST(KmsgE2E, XidInRealKmsgMakesXidUnhealthyWithinTwoSeconds) {
  const char* real = std::getenv("GPUD_TEST_REAL_KMSG");
  if (real == nullptr || std::string(real) != "1")
    GTEST_SKIP() << "GPUD_TEST_REAL_KMSG=1 not set: this test would write into the real /dev/kmsg";
  if (!kmsg_writable())
    GTEST_SKIP() << "/dev/kmsg is not writable here (needs root): the real-kernel-log e2e test is "
                    "skipped";
  std::string dir = make_temp_dir();
  {
    DaemonProcess d(dir, {}, false, {"GPUD_KMSG_PATH=/dev/kmsg"});
    ASSERT_TRUE(d.ready()) << d.log();
    const std::string pci = unique_pci();
    ::setenv("GPUD_KMSG_PATH", "/dev/kmsg", 1);
    auto w = run_gpud({"inject-fault", "--xid", "79", "--pci", pci});
    ::unsetenv("GPUD_KMSG_PATH");
    ASSERT_EQ(w.exit_code, 0) << w.out;
    nlohmann::json event;
    Ms took = wait_for_xid(d, pci, Ms(2000), &event);
    ASSERT_GE(took.count(), 0) << "no Unhealthy xid state with event for " << pci << "\n"
                               << d.log();
    EXPECT_EQ(event["extra_info"]["xid"], 79);
    EXPECT_EQ(event["extra_info"].value("injected", false), true) << event.dump();
    EXPECT_EQ(event["name"], "error_xid");
    EXPECT_EQ(event["type"], "Fatal");
    std::cout << "[ kmsg e2e ] Xid 79 visible after " << took.count() << " ms\n";
    // The line stays in the machine's ring until reboot; the daemon's verdict is cleared as a
    // person would clear it.
    auto cleared = d.post(std::string("/v1/health-states/set-healthy?components=") + kXid);
    ASSERT_TRUE(cleared);
    EXPECT_EQ(cleared->status, 200) << cleared->body;
    auto healthy = [&] {
      const nlohmann::json s = component_state(d, kXid);
      return s.is_object() && s.value("health", "") == "Healthy";
    };
    const auto start = std::chrono::steady_clock::now();
    while (!healthy() && std::chrono::steady_clock::now() - start < Ms(3000))
      std::this_thread::sleep_for(Ms(50));
    EXPECT_TRUE(healthy()) << component_state(d, kXid).dump();
  }
  std::filesystem::remove_all(dir);
}

// The ring buffer is read again at every start. A record read before the restart must not become
// a second event; a record added while the daemon was down must be picked up (which shows the ring
// really was re-read). The "ring" is a private file of raw /dev/kmsg records (GPUD_KMSG_PATH), so
// the test runs anywhere and other tests' daemons never see these Xids.
TEST(KmsgE2E, RestartRereadsTheRingWithoutDuplicatingEvents) {
  std::string dir = make_temp_dir();
  const std::string kmsg = dir + "/kmsg";
  const std::string before = unique_pci(), while_down = unique_pci();
  auto record = [](int seq, long usec, const std::string& pci, int xid) {
    std::string bdf = pci.substr(0, pci.size() - 2);  // the kernel omits the function
    return "4," + std::to_string(seq) + "," + std::to_string(usec) + ",-;NVRM: Xid (PCI:" + bdf +
           "): " + std::to_string(xid) + ", pid='<unknown>', name=<unknown>, test.\n";
  };
  // Kernel timestamps of "a few seconds ago", so the events fall inside /v1/events' default window.
  double uptime_s = 0;
  std::ifstream("/proc/uptime") >> uptime_s;
  const long now_us = static_cast<long>(uptime_s * 1e6);
  std::ofstream(kmsg) << "6,1," << now_us - 3000000 << ",-;Linux version 6.1.0 (test)\n"
                      << record(2, now_us - 2000000, before, 79);
  auto count = [](const DaemonProcess& d, const std::string& pci) {
    auto res = d.get(std::string("/v1/events?components=") + kXid);
    int n = 0;
    if (!res || res->status != 200) return -1;
    for (const auto& c : parse_json(res->body))
      for (const auto& e : c.value("events", nlohmann::json::array()))
        if (e.contains("extra_info") && e["extra_info"].value("pci_bus_id", "") == pci) ++n;
    return n;
  };
  auto wait_count = [&](const DaemonProcess& d, const std::string& pci) {
    auto start = std::chrono::steady_clock::now();
    while (count(d, pci) < 1 && std::chrono::steady_clock::now() - start < Ms(5000))
      std::this_thread::sleep_for(Ms(50));
    return count(d, pci);
  };
  ::setenv("GPUD_KMSG_PATH", kmsg.c_str(), 1);
  {
    DaemonProcess d(dir + "/data", {}, false);
    ASSERT_TRUE(d.ready()) << d.log();
    EXPECT_EQ(wait_count(d, before), 1) << d.log();
    EXPECT_EQ(d.stop(), 0);
  }
  std::ofstream(kmsg, std::ios::app) << record(3, now_us - 1000000, while_down, 79);
  DaemonProcess d(dir + "/data", {}, false);
  ::unsetenv("GPUD_KMSG_PATH");
  ASSERT_TRUE(d.ready()) << d.log();
  EXPECT_EQ(wait_count(d, while_down), 1) << "the record added while gpud was down was not read\n"
                                          << d.log();
  EXPECT_EQ(count(d, before), 1) << "the ring re-read duplicated an event";
  d.stop();
  std::filesystem::remove_all(dir);
}

// Only the driver's own Xid is one: a record a process wrote to /dev/kmsg (facility user) and the
// kernel's executable-stack warning quoting an Xid in a path are read and dropped, while the real
// record after them becomes the event (which shows the others were read first).
TEST(KmsgE2E, OnlyTheDriversXidRecordsMakeEvents) {
  std::string dir = make_temp_dir();
  const std::string kmsg = dir + "/kmsg";
  const std::string user_write = unique_pci(), quoted = unique_pci(), real = unique_pci();
  auto xid_text = [](const std::string& pci) {
    return "NVRM: Xid (PCI:" + pci.substr(0, pci.size() - 2) +
           "): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.";
  };
  double uptime_s = 0;
  std::ifstream("/proc/uptime") >> uptime_s;
  const long now_us = static_cast<long>(uptime_s * 1e6);
  // 11 = LOG_USER | LOG_ERR, what `echo '<3>...' > /dev/kmsg` by a process becomes.
  std::ofstream(kmsg) << "11,1," << now_us - 3000000 << ",-;" << xid_text(user_write) << "\n"
                      << "4,2," << now_us - 2000000 << ",-;process '/tmp/" << xid_text(quoted)
                      << "' started with executable stack\n"
                      << "3,3," << now_us - 1000000 << ",-;" << xid_text(real) << "\n";
  auto d = std::make_unique<DaemonProcess>(dir + "/data", std::vector<std::string>{}, false,
                                           std::vector<std::string>{"GPUD_KMSG_PATH=" + kmsg});
  ASSERT_TRUE(d->ready()) << d->log();
  nlohmann::json event;
  ASSERT_GE(wait_for_xid(*d, real, Ms(5000), &event).count(), 0) << d->log();
  EXPECT_TRUE(find_event(*d, user_write).is_null()) << "a user-facility record made an Xid";
  EXPECT_TRUE(find_event(*d, quoted).is_null()) << "an Xid quoted in a path made an Xid";
  d->stop();
  std::filesystem::remove_all(dir);
}

TEST(KmsgE2E, PostInjectFaultFlowsThroughTheDaemon) {
  std::string dir = make_temp_dir();
  const std::string kmsg = dir + "/kmsg";
  auto daemon = start_with_fault_injection(dir);
  DaemonProcess& d = *daemon;
  ASSERT_TRUE(d.ready()) << d.log();
  httplib::Client cli(d.url());
  auto bad = cli.Post("/inject-fault", "{\"xid\":{}}", "application/json");
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 400) << bad->body;
  auto junk = cli.Post("/inject-fault", "not json", "application/json");
  ASSERT_TRUE(junk);
  EXPECT_EQ(junk->status, 400);
  const std::string pci = unique_pci();
  auto ok = cli.Post("/inject-fault", "{\"xid\":{\"id\":79,\"pci\":\"" + pci + "\"}}",
                     "application/json");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200) << ok->body;
  EXPECT_EQ(parse_json(ok->body).value("message", ""), "fault injected");
  EXPECT_NE(read_file(kmsg).find("NVRM: Xid (PCI:" + pci.substr(0, pci.size() - 2) + "): 79"),
            std::string::npos);
  EXPECT_NE(read_file(kmsg).find("[gpud inject-fault]"), std::string::npos) << read_file(kmsg);
  nlohmann::json event;
  ASSERT_GE(wait_for_xid(d, pci, Ms(3000), &event).count(), 0) << d.log();
  // An injected fault says so, in its event and in the component's reason ...
  EXPECT_EQ(event["extra_info"].value("injected", false), true) << event.dump();
  auto state_field = [&](const char* key) {
    const nlohmann::json s = component_state(d, kXid);
    return s.is_object() ? s.value(key, "") : std::string();
  };
  EXPECT_NE(state_field("reason").find("(injected)"), std::string::npos)
      << component_state(d, kXid).dump();
  // ... and set-healthy clears it as any other.
  auto cleared = d.post(std::string("/v1/health-states/set-healthy?components=") + kXid);
  ASSERT_TRUE(cleared);
  EXPECT_EQ(cleared->status, 200) << cleared->body;
  auto start = std::chrono::steady_clock::now();
  while (state_field("health") != "Healthy" && std::chrono::steady_clock::now() - start < Ms(3000))
    std::this_thread::sleep_for(Ms(50));
  EXPECT_EQ(state_field("health"), "Healthy") << component_state(d, kXid).dump();
  d.stop();
  std::filesystem::remove_all(dir);
}

// Issue 11's scenario through the daemon: an Xid 79 on one GPU, then an Xid 48 on another. The
// newer error must not hide the first: the reason names both GPUs, the action is the strongest,
// extra_info.devices lists both, and the turn to Unhealthy is logged once.
TEST(KmsgE2E, AnXidOnAnotherGpuDoesNotHideTheFirstAndTheTurnIsLoggedOnce) {
  std::string dir = make_temp_dir();
  auto daemon = start_with_fault_injection(dir);
  DaemonProcess& d = *daemon;
  ASSERT_TRUE(d.ready()) << d.log();
  httplib::Client cli(d.url());
  const std::string lost = unique_pci(), other = unique_pci();
  auto inject = [&](int xid, const std::string& pci) {
    auto r = cli.Post("/inject-fault",
                      "{\"xid\":{\"id\":" + std::to_string(xid) + ",\"pci\":\"" + pci + "\"}}",
                      "application/json");
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
  };
  inject(79, lost);
  nlohmann::json event;
  ASSERT_GE(wait_for_xid(d, lost, Ms(3000), &event).count(), 0) << d.log();
  inject(48, other);
  ASSERT_GE(wait_for_xid(d, other, Ms(3000), &event).count(), 0) << d.log();
  nlohmann::json s;
  const auto start = std::chrono::steady_clock::now();
  do {
    s = component_state(d, kXid);
    if (s.is_object() && s.value("reason", "").find(other) != std::string::npos) break;
    std::this_thread::sleep_for(Ms(50));
  } while (std::chrono::steady_clock::now() - start < Ms(3000));
  ASSERT_TRUE(s.is_object()) << d.log();
  const std::string reason = s.value("reason", "");
  EXPECT_EQ(s.value("health", ""), "Unhealthy") << s.dump();
  ASSERT_NE(reason.find(lost), std::string::npos) << "the Xid 79 GPU is hidden: " << reason;
  ASSERT_NE(reason.find(other), std::string::npos) << reason;
  // Both need a reboot, so neither outranks the other: the order between them is not checked.
  EXPECT_EQ(s["suggested_actions"]["repair_actions"][0], "REBOOT_SYSTEM") << s.dump();
  const auto devices = parse_json(s["extra_info"].value("devices", "[]"));
  std::set<std::string> buses;
  for (const auto& dev : devices) buses.insert(dev.value("pci_bus_id", ""));
  EXPECT_EQ(buses.count(lost), 1U) << devices.dump();
  EXPECT_EQ(buses.count(other), 1U) << devices.dump();
  // One log line for the turn to Unhealthy (the second Xid changes the reason, not the health);
  // from Healthy, or from Initializing if the first check came after the first Xid.
  std::istringstream log(d.log());
  std::vector<std::string> turns;
  for (std::string line; std::getline(log, line);)
    if (line.find("component accelerator-nvidia-error-xid: ") != std::string::npos &&
        line.find(" -> Unhealthy: ") != std::string::npos)
      turns.push_back(line);
  ASSERT_EQ(turns.size(), 1U) << d.log();
  EXPECT_NE(turns[0].find(lost), std::string::npos) << turns[0];
  EXPECT_NE(turns[0].find("(suggested: REBOOT_SYSTEM)"), std::string::npos) << turns[0];
  d.stop();
  std::filesystem::remove_all(dir);
}

TEST(KmsgE2E, ScanSavedLogShowsEventsInTheirComponentsAndFails) {
  auto r = run_gpud({"scan", "--kernel-log", fixture("dmesg.log"), "--json", "--log-level", "error",
                     "--components",
                     "accelerator-nvidia-error-xid,accelerator-nvidia-"
                     "error-sxid,memory,disk,cpu,os"});
  EXPECT_EQ(r.exit_code, 1) << r.out;
  auto doc = parse_json(r.out);
  ASSERT_TRUE(doc.is_object()) << r.out;
  std::map<std::string, nlohmann::json> by;
  for (const auto& c : doc["components"]) by[c["component"]] = c;
  for (const char* c :
       {"accelerator-nvidia-error-xid", "accelerator-nvidia-error-sxid", "memory", "disk"}) {
    ASSERT_TRUE(by.count(c)) << c << "\n" << r.out;
    EXPECT_FALSE(by[c]["events"].empty()) << c;
  }
  bool has_xid = false;
  for (const auto& e : by[kXid]["events"])
    has_xid |= e["extra_info"].contains("xid") && e["extra_info"].contains("pci_bus_id");
  EXPECT_TRUE(has_xid);
  EXPECT_EQ(by[kXid]["states"][0]["health"], "Unhealthy");
  bool oom = false;
  for (const auto& e : by["memory"]["events"]) oom |= e["name"] == "OOM";
  EXPECT_TRUE(oom);
}

TEST(KmsgE2E, ScanReadsStdinWithDash) {
  auto r = shell(std::string(GPUD_BINARY) +
                 " scan --kernel-log - --json --log-level error --components "
                 "accelerator-nvidia-error-xid < " +
                 fixture("journalctl-k.log"));
  EXPECT_EQ(r.exit_code, 1) << r.out;
  auto pos = r.out.find('{');
  ASSERT_NE(pos, std::string::npos) << r.out;
  auto doc = parse_json(r.out.substr(pos));
  ASSERT_TRUE(doc.is_object()) << r.out;
  ASSERT_FALSE(doc["components"].empty());
  EXPECT_FALSE(doc["components"][0]["events"].empty());
}

TEST(KmsgE2E, InjectFaultWritesKernelLineAndRefusesUnwritable) {
  std::string dir = make_temp_dir();
  const std::string kmsg = dir + "/kmsg";
  { std::ofstream(kmsg).flush(); }
  auto r = shell("GPUD_KMSG_PATH=" + kmsg + " " + GPUD_BINARY +
                 " inject-fault --sxid 20034 --pci 0000:05:00.0");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(read_file(kmsg).find("SXid (PCI:0000:05:00.0): 20034"), std::string::npos);
  r = shell("GPUD_KMSG_PATH=" + kmsg + " " + GPUD_BINARY +
            " inject-fault --kernel-message 'hello kernel' --kernel-log-level kern.warning");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(read_file(kmsg).find("<44>hello kernel"), std::string::npos) << read_file(kmsg);
  r = shell("GPUD_KMSG_PATH=/nonexistent/dir/kmsg " + std::string(GPUD_BINARY) +
            " inject-fault --xid 79");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.out.find("cannot"), std::string::npos) << r.out;
  r = shell(std::string(GPUD_BINARY) + " inject-fault --xid 79 --kernel-log-level LOUD");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  std::filesystem::remove_all(dir);
}

// Two lines that once aborted gpud (std::stoll / std::stoul threw out of the matcher): a pid of 20
// digits and an NVLink Xid 145 with a 17-digit hex field. Bus ids are unique to this test.
struct HostileLines {
  std::string pid_pci = unique_pci(), nvlink_pci = unique_pci();
  static std::string bdf(const std::string& pci) { return pci.substr(0, pci.size() - 2); }
  std::string huge_pid() const {
    return "NVRM: Xid (PCI:" + bdf(pid_pci) +
           "): 79, pid=99999999999999999999, name=x, GPU has fallen off the bus.";
  }
  std::string wide_nvlink() const {
    return "NVRM: Xid (PCI:" + bdf(nvlink_pci) +
           "): 145, RLW_REMAP Nonfatal XC0 i0 Link 12 (0x10000000000000004 0x00000000 0x00000000 "
           "0x00000000 0x00000000 0x00000000)";
  }
};

// An Xid line appended to the followed file reaches the Xid component's state in /v1/states and
// its health series in /metrics without waiting for a timer: the follower is woken by the file's
// change (inotify; the log says so, which is the condition this test rests on, since a poll would
// also get there eventually), and the line's check is triggered, not left to its interval. Each
// latency is only bounded loosely (a loaded 2-core machine); `make bench` reports the figure.
TEST(KmsgE2E, AnAppendedXidLineIsJudgedWithoutWaitingForATimer) {
  std::string dir = make_temp_dir();
  const std::string kmsg = dir + "/kmsg";
  { std::ofstream(kmsg).flush(); }
  // A GPU node (eight fake GPUs): the Xid component is checked from the start, and NVML's
  // collections run beside the kernel log as they would on a real node.
  DaemonProcess d(dir + "/data", {"--log-level", "info", "--nvml-lib", GPUD_FAKE_NVML}, false,
                  {"GPUD_KMSG_PATH=" + kmsg, "FAKE_NVML_SCENARIO=" + std::string(GPUD_SOURCE_DIR) +
                                                 "/testing/fixtures/nvml/h100x8-healthy.json"});
  ASSERT_TRUE(d.ready()) << d.log();
  EXPECT_NE(d.log().find("following " + kmsg + " (woken by inotify)"), std::string::npos)
      << d.log();
  auto unhealthy_in_metrics = [&] {
    auto m = d.get("/metrics");
    return m && m->status == 200 &&
           m->body.find(
               "gpud_component_health{component=\"accelerator-nvidia-error-xid\","
               "health=\"Unhealthy\"} 1") != std::string::npos;
  };
  auto health = [&] { return component_state(d, kXid).value("health", ""); };
  for (int i = 0; i < 3; ++i) {
    // Healthy first (a check has run, or set-healthy cleared the previous Xid).
    if (i > 0) ASSERT_TRUE(d.post(std::string("/v1/health-states/set-healthy?components=") + kXid));
    ASSERT_TRUE(
        eventually([&] { return health() == "Healthy" && !unhealthy_in_metrics(); }, Ms(10000)))
        << component_state(d, kXid).dump();
    const std::string pci = unique_pci();
    const auto t0 = std::chrono::steady_clock::now();
    std::ofstream(kmsg, std::ios::app) << "<3>NVRM: Xid (PCI:" << pci.substr(0, pci.size() - 2)
                                       << "): 79, pid=1, name=x, GPU has fallen off the bus.\n";
    while (health() != "Unhealthy" && std::chrono::steady_clock::now() - t0 < Ms(5000))
      std::this_thread::sleep_for(Ms(2));
    const auto states_ms =
        std::chrono::duration_cast<Ms>(std::chrono::steady_clock::now() - t0).count();
    while (!unhealthy_in_metrics() && std::chrono::steady_clock::now() - t0 < Ms(5000))
      std::this_thread::sleep_for(Ms(2));
    const auto metrics_ms =
        std::chrono::duration_cast<Ms>(std::chrono::steady_clock::now() - t0).count();
    std::cout << "[ kmsg e2e ] Xid line -> /v1/states Unhealthy " << states_ms
              << " ms, -> /metrics " << metrics_ms << " ms\n";
    EXPECT_EQ(health(), "Unhealthy") << component_state(d, kXid).dump();
    EXPECT_LT(states_ms, 2000);
    EXPECT_LT(metrics_ms, 2000);
  }
  d.stop();
  std::filesystem::remove_all(dir);
}

TEST(KmsgE2E, HostileXidLinesDoNotStopTheDaemon) {
  std::string dir = make_temp_dir();
  const std::string kmsg = dir + "/kmsg";
  HostileLines lines;
  double uptime_s = 0;
  std::ifstream("/proc/uptime") >> uptime_s;
  const long now_us = static_cast<long>(uptime_s * 1e6);
  std::ofstream(kmsg) << "4,1," << now_us - 2000000 << ",-;" << lines.huge_pid() << "\n"
                      << "4,2," << now_us - 1000000 << ",-;" << lines.wide_nvlink() << "\n";
  ::setenv("GPUD_KMSG_PATH", kmsg.c_str(), 1);
  DaemonProcess d(dir + "/data", {}, false);
  ::unsetenv("GPUD_KMSG_PATH");
  ASSERT_TRUE(d.ready()) << d.log();
  nlohmann::json event;
  ASSERT_GE(wait_for_xid(d, lines.pid_pci, Ms(5000), &event).count(), 0) << d.log();
  EXPECT_EQ(event["extra_info"]["xid"], 79);
  EXPECT_EQ(event["extra_info"].value("pid_invalid", false), true) << event.dump();
  EXPECT_FALSE(event["extra_info"].contains("pid")) << event.dump();
  nlohmann::json nvlink;
  for (int i = 0; i < 100 && nvlink.is_null(); ++i) {
    nvlink = find_event(d, lines.nvlink_pci);
    if (nvlink.is_null()) std::this_thread::sleep_for(Ms(50));
  }
  ASSERT_FALSE(nvlink.is_null()) << d.log();
  EXPECT_EQ(nvlink["extra_info"]["xid"], 145);
  EXPECT_EQ(nvlink["extra_info"].value("nvlink_fields_invalid", false), true) << nvlink.dump();
  // The follower is still reading: a line appended afterwards arrives too.
  const std::string after = unique_pci();
  std::ofstream(kmsg, std::ios::app)
      << "4,3," << now_us << ",-;NVRM: Xid (PCI:" << HostileLines::bdf(after)
      << "): 79, pid=1, name=y, test.\n";
  for (int i = 0; i < 100 && find_event(d, after).is_null(); ++i)
    std::this_thread::sleep_for(Ms(50));
  EXPECT_FALSE(find_event(d, after).is_null()) << d.log();
  EXPECT_EQ(d.stop(), 0) << d.log();
  std::filesystem::remove_all(dir);
}

TEST(KmsgE2E, ScanOfHostileXidLinesExitsUnhealthyNotAborted) {
  std::string dir = make_temp_dir();
  HostileLines lines;
  const std::string log = dir + "/dmesg.txt";
  std::ofstream(log) << "[ 1005.000001] " << lines.huge_pid() << "\n"
                     << "[ 1006.000001] " << lines.wide_nvlink() << "\n";
  auto r = run_gpud(
      {"scan", "--kernel-log", log, "--json", "--log-level", "error", "--components", kXid});
  EXPECT_EQ(r.exit_code, 1) << "want 1 (unhealthy), not an abort (134)\n" << r.out;
  auto doc = parse_json(r.out);
  ASSERT_TRUE(doc.is_object()) << r.out;
  ASSERT_EQ(doc["components"].size(), 1u) << r.out;
  std::map<std::string, nlohmann::json> by_pci;
  for (const auto& e : doc["components"][0]["events"])
    by_pci[e["extra_info"].value("pci_bus_id", "")] = e["extra_info"];
  ASSERT_TRUE(by_pci.count(lines.pid_pci)) << r.out;
  EXPECT_EQ(by_pci[lines.pid_pci].value("pid_invalid", false), true);
  ASSERT_TRUE(by_pci.count(lines.nvlink_pci)) << r.out;
  EXPECT_EQ(by_pci[lines.nvlink_pci]["xid"], 145);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace gpud::e2e
