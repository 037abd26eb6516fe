// End-to-end: what the daemon does when its state database cannot write (a full file system) or
// turns out corrupt (at start and while running), and the modes of the files it creates.
#include <errno.h>
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>
#include <thread>

#include "testing/peak_rss.h"
#include "testing/scribble.h"
#include "tests/e2e/daemon_process.h"

namespace gpud::e2e {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
constexpr const char* kXid = "accelerator-nvidia-error-xid";

// Removes a temporary directory when the test ends, however it ends.
struct TempTree {
  std::string path = make_temp_dir();
  ~TempTree() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

// A size-limited tmpfs mounted for one test and unmounted however the test ends. Declared after
// the TempTree it lives in and before the daemon that uses it, so it goes after the daemon stops.
class TmpfsMount {
 public:
  TmpfsMount(const std::string& path, const std::string& size) : path_(path) {
    fs::create_directories(path_);
    std::string opts = "size=" + size + ",mode=0700";
    if (::mount("tmpfs", path_.c_str(), "tmpfs", 0, opts.c_str()) == 0)
      mounted_ = true;
    else
      error_ = std::strerror(errno);
  }
  ~TmpfsMount() {
    if (mounted_) ::umount2(path_.c_str(), MNT_DETACH);
  }
  TmpfsMount(const TmpfsMount&) = delete;
  TmpfsMount& operator=(const TmpfsMount&) = delete;
  bool mounted() const { return mounted_; }
  const std::string& error() const { return error_; }

 private:
  std::string path_;
  bool mounted_ = false;
  std::string error_;
};

// A private kernel log (GPUD_KMSG_PATH) of raw /dev/kmsg records with kernel times of "now", so
// the events fall inside /v1/events' default window.
class KmsgFile {
 public:
  explicit KmsgFile(std::string path) : path_(std::move(path)) {
    std::ofstream(path_) << "6,1," << now_us() << ",-;Linux version 6.1.0 (test)\n";
  }
  std::string env() const { return "GPUD_KMSG_PATH=" + path_; }
  // Appends an Xid 79 line for `pci` ("0000:3b:00.0"; the kernel prints it without the function).
  void xid79(const std::string& pci) {
    std::ofstream(path_, std::ios::app)
        << "4," << ++seq_ << "," << now_us()
        << ",-;NVRM: Xid (PCI:" << pci.substr(0, pci.size() - 2) << "): 79, pid=1, name=x, test.\n";
  }

 private:
  static long now_us() {
    double uptime_s = 0;
    std::ifstream("/proc/uptime") >> uptime_s;
    return static_cast<long>(uptime_s * 1e6);
  }
  std::string path_;
  int seq_ = 1;
};

std::string bus_id(int i) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0000:%02x:00.0", 0x10 + i);
  return buf;
}

nlohmann::json get_json(const DaemonProcess& d, const std::string& path) {
  auto res = d.get(path);
  if (!res || res->status != 200) return nullptr;
  return parse_json(res->body);
}

// How many Xid events /v1/events lists per bus id.
std::map<std::string, int> xid_events_by_bus(const DaemonProcess& d) {
  std::map<std::string, int> out;
  auto doc = get_json(d, std::string("/v1/events?components=") + kXid);
  if (!doc.is_array()) return out;
  for (const auto& c : doc)
    for (const auto& e : c.value("events", nlohmann::json::array()))
      ++out[e.value("extra_info", nlohmann::json::object()).value("pci_bus_id", "")];
  return out;
}

// The value of one series in /metrics ("name" or "name{labels}"), if present.
std::optional<double> metric(const DaemonProcess& d, const std::string& series) {
  auto res = d.get("/metrics");
  if (!res || res->status != 200) return std::nullopt;
  std::istringstream in(res->body);
  for (std::string line; std::getline(in, line);)
    if (line.size() > series.size() && line.compare(0, series.size(), series) == 0 &&
        line[series.size()] == ' ')
      return std::stod(line.substr(series.size() + 1));
  return std::nullopt;
}

// The `eventually` limits below are several times what the daemon needs (the gpud component is
// checked every 10 s, waiting events retried every 5 s), so that a loaded machine or a sanitizer
// build does not fail them.

// The pci_bus_id of every Xid row of a stopped daemon's database, in the order stored (by id).
std::vector<std::string> stored_xid_buses(const std::string& db_path) {
  std::vector<std::string> out;
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(db_path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK) {
    sqlite3_stmt* st = nullptr;
    sqlite3_prepare_v2(db,
                       "SELECT extra_info FROM gpud_events WHERE component = "
                       "'accelerator-nvidia-error-xid' ORDER BY id",
                       -1, &st, nullptr);
    while (st != nullptr && sqlite3_step(st) == SQLITE_ROW) {
      auto j = parse_json(reinterpret_cast<const char*>(sqlite3_column_text(st, 0)));
      out.push_back(j.value("pci_bus_id", ""));
    }
    sqlite3_finalize(st);
  }
  sqlite3_close(db);
  return out;
}

// Writes until the file system says it is full; returns the bytes written.
size_t fill(const std::string& path) {
  std::ofstream(path).flush();
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return 0;
  std::setvbuf(f, nullptr, _IONBF, 0);
  size_t total = 0;
  for (size_t chunk : {size_t{65536}, size_t{4096}, size_t{512}, size_t{1}}) {
    std::string block(chunk, 'f');
    while (std::fwrite(block.data(), 1, chunk, f) == chunk) total += chunk;
  }
  std::fclose(f);
  return total;
}

mode_t mode_of(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return 0;
  return st.st_mode & 07777;
}

TEST(StoreE2E, FullDiskKeepsXidEventsAndStoresEachOnceInOrderWhenSpaceReturns) {
  TempTree tree;
  const std::string data = tree.path + "/data";
  TmpfsMount tmpfs(data, "2m");
  if (!tmpfs.mounted())
    GTEST_SKIP() << "cannot mount a 2 MiB tmpfs at " << data << " (" << tmpfs.error()
                 << "): the full-disk test needs root and mount(2)";
  KmsgFile kmsg(tree.path + "/kmsg");
  const std::string filler = data + "/filler";
  {
    DaemonProcess d(data, {}, false, {kmsg.env()});
    ASSERT_TRUE(d.ready()) << d.log();
    size_t filled = fill(filler);
    ASSERT_GT(filled, 0u);

    for (int i = 0; i < 20; ++i) kmsg.xid79(bus_id(i));
    // The Xid component judges the events waiting in memory at once.
    nlohmann::json xid;
    EXPECT_TRUE(eventually(
        [&] {
          xid = component_state(d, kXid);
          return xid.is_object() && xid.value("health", "") == "Unhealthy";
        },
        5s))
        << xid.dump() << "\n"
        << d.log();
    EXPECT_TRUE(eventually([&] { return xid_events_by_bus(d).size() == 20; }, 5s));
    EXPECT_EQ(metric(d, "gpud_store_event_backlog"), 20.0)
        << "the events were stored although the file system is full (" << filled
        << " bytes of filler)";
    EXPECT_GE(metric(d, "gpud_store_errors_total{op=\"insert\"}").value_or(0), 1.0);
    nlohmann::json self;
    EXPECT_TRUE(eventually(
        [&] {
          self = component_state(d, "gpud");
          return self.is_object() && self.value("health", "") == "Degraded" &&
                 self.value("reason", "").find("database or disk is full") != std::string::npos;
        },
        25s))
        << self.dump();
    EXPECT_EQ(metric(d, "gpud_store_writable{gpud_component=\"gpud\"}"), 0.0);

    ASSERT_TRUE(fs::remove(filler));
    EXPECT_TRUE(eventually([&] { return metric(d, "gpud_store_event_backlog") == 0.0; }, 15s))
        << d.log();
    auto by_bus = xid_events_by_bus(d);
    EXPECT_EQ(by_bus.size(), 20u);
    for (int i = 0; i < 20; ++i) EXPECT_EQ(by_bus[bus_id(i)], 1) << bus_id(i);
    EXPECT_EQ(d.stop(), 0);
  }
  std::vector<std::string> expected;
  for (int i = 0; i < 20; ++i) expected.push_back(bus_id(i));
  EXPECT_EQ(stored_xid_buses(data + "/gpud.state"), expected)
      << "each Xid stored once, in the order the kernel logged them";
}

TEST(StoreE2E, DatabaseCorruptedWhileRunningIsQuarantinedAndReopened) {
  TempTree tree;
  const std::string data = tree.path + "/data";
  const std::string state = data + "/gpud.state";
  KmsgFile kmsg(tree.path + "/kmsg");
  std::string moved;
  {
    DaemonProcess d(data, {}, false, {kmsg.env()});
    ASSERT_TRUE(d.ready()) << d.log();
    kmsg.xid79(bus_id(0));
    ASSERT_TRUE(eventually([&] { return xid_events_by_bus(d).count(bus_id(0)) == 1; }, 5s))
        << d.log();

    testing::scribble(state);
    testing::scribble(state + "-wal");
    kmsg.xid79(bus_id(1));
    // The next write finds the damage: the file is moved aside, a fresh one takes the event.
    EXPECT_TRUE(eventually([&] { return xid_events_by_bus(d).count(bus_id(1)) == 1; }, 5s))
        << d.log();
    EXPECT_TRUE(eventually(
        [&] {
          for (const auto& e : fs::directory_iterator(data))
            if (e.path().filename().string().rfind("gpud.state.corrupt-", 0) == 0)
              moved = e.path().string();
          return !moved.empty();
        },
        5s))
        << d.log();
    EXPECT_EQ(metric(d, "gpud_store_quarantines_total"), 1.0);
    nlohmann::json self;
    EXPECT_TRUE(eventually(
        [&] {
          self = component_state(d, "gpud");
          return self.is_object() && self.value("health", "") == "Degraded" &&
                 self.value("reason", "").find("moved to " + moved) != std::string::npos;
        },
        25s))
        << self.dump() << "\n"
        << d.log();
    EXPECT_EQ(d.stop(), 0);
  }
  EXPECT_EQ(stored_xid_buses(state), std::vector<std::string>{bus_id(1)});
}

// A store that cannot answer under a running daemon: damaged, with its directory taken away, so no
// fresh database can replace it. The Xid component, which judges from the store, says so instead
// of reading an empty history as Healthy, and judges the Xid once the store is back.
TEST(StoreE2E, AStoreThatCannotAnswerIsUnhealthyNotHealthy) {
  TempTree tree;
  const std::string data = tree.path + "/data";
  const std::string state = data + "/gpud.state";
  KmsgFile kmsg(tree.path + "/kmsg");
  DaemonProcess d(data, {}, false, {kmsg.env()});
  ASSERT_TRUE(d.ready()) << d.log();
  // A first Xid, stored: the component takes part (this machine has no GPU) and is Unhealthy for
  // it.
  kmsg.xid79(bus_id(1));
  nlohmann::json xid;
  ASSERT_TRUE(eventually(
      [&] {
        xid = component_state(d, kXid);
        return xid.is_object() && xid.value("reason", "").find("XID 79") != std::string::npos;
      },
      10s))
      << xid.dump() << "\n"
      << d.log();
  testing::scribble(state);
  testing::scribble(state + "-wal");
  fs::rename(data, tree.path + "/gone");
  kmsg.xid79(bus_id(2));  // its write finds the damage; the event waits, the store is unusable
  EXPECT_TRUE(eventually(
      [&] {
        xid = component_state(d, kXid);
        return xid.is_object() && xid.value("health", "") == "Unhealthy" &&
               xid.value("reason", "")
                       .find(
                           "cannot read the kernel-log history from the event "
                           "store") != std::string::npos;
      },
      10s))
      << xid.dump() << "\n"
      << d.log();
  fs::create_directory(data);  // room for a fresh database: the waiting event is stored there
  EXPECT_TRUE(eventually(
      [&] {
        xid = component_state(d, kXid);
        return xid.is_object() && xid.value("health", "") == "Unhealthy" &&
               xid.value("reason", "").find("XID 79") != std::string::npos &&
               xid.value("reason", "").find("event store") == std::string::npos;
      },
      15s))  // the store retries within 10 s, and a store usable again re-checks every component
      << xid.dump() << "\n"
      << d.log();
  EXPECT_EQ(d.stop(), 0);
}

TEST(StoreE2E, QuarantineAtStartShowsInStatesAndMetricsUntilSetHealthy) {
  TempTree tree;
  const std::string data = tree.path + "/data";
  fs::create_directories(data);
  { std::ofstream(data + "/gpud.state", std::ios::binary) << std::string(8192, 'x'); }
  DaemonProcess d(data, {}, false);
  ASSERT_TRUE(d.ready()) << d.log();
  nlohmann::json self;
  ASSERT_TRUE(eventually(
      [&] {
        self = component_state(d, "gpud");
        return self.is_object() && self.value("health", "") != "Initializing";
      },
      5s));
  EXPECT_EQ(self.value("health", ""), "Degraded") << self.dump();
  EXPECT_NE(self.value("reason", "").find("state database was corrupt"), std::string::npos);
  EXPECT_NE(self.value("reason", "").find(data + "/gpud.state.corrupt-"), std::string::npos);
  EXPECT_EQ(metric(d, "gpud_store_quarantines_total"), 1.0);
  EXPECT_EQ(metric(d, "gpud_store_quarantined_files{gpud_component=\"gpud\"}"), 1.0);
  EXPECT_TRUE(metric(d, "gpud_component_health{component=\"gpud\",health=\"Degraded\"}") == 1.0);

  auto ack = d.post("/v1/health-states/set-healthy?components=gpud");
  ASSERT_TRUE(ack);
  EXPECT_EQ(ack->status, 200) << ack->body;
  EXPECT_TRUE(eventually(
      [&] {
        self = component_state(d, "gpud");
        return self.is_object() && self.value("health", "") == "Healthy";
      },
      5s))
      << self.dump();
  // The file stays on disk, and counted, until someone looks at it.
  EXPECT_EQ(metric(d, "gpud_store_quarantined_files{gpud_component=\"gpud\"}"), 1.0);
}

// Adds `count` application Xids (13, 31, 43 in turn, on eight GPUs, five seconds apart, ending a
// day ago) to a stopped daemon's database in one statement; true when they are all there.
bool add_xid_history(const std::string& db_path, int count) {
  sqlite3* db = nullptr;
  bool ok = sqlite3_open_v2(db_path.c_str(), &db, SQLITE_OPEN_READWRITE, nullptr) == SQLITE_OK;
  const long end_s = static_cast<long>(std::time(nullptr)) - 24 * 3600;
  const std::string code = "(CASE i % 3 WHEN 0 THEN 13 WHEN 1 THEN 31 ELSE 43 END)";
  const std::string bus = "printf('0000:%02x:00', 24 + (i % 8) * 16)";
  const std::string sql =
      "WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < " +
      std::to_string(count - 1) +
      ") INSERT INTO gpud_events(component, unix_seconds, name, type, message, extra_info) "
      "SELECT 'accelerator-nvidia-error-xid', " +
      std::to_string(end_s - 5L * count) + " + 5 * i, 'error_xid', 'Warning', 'XID ' || " + code +
      " || ' application error detected on GPU PCI:' || " + bus + ", json_object('pci_bus_id', " +
      bus + " || '.0', 'xid', " + code +
      ", 'repair_actions', json_array('CHECK_USER_APP_AND_GPU'), 'pid', 1000 + i, "
      "'log_line', 'NVRM: Xid (PCI:' || " +
      bus + " || '): ' || " + code +
      " || ', pid=' || (1000 + i) || ', name=python3, Graphics Exception') FROM n";
  ok = ok && sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr) == SQLITE_OK;
  sqlite3_stmt* st = nullptr;
  ok = ok &&
       sqlite3_prepare_v2(db, "SELECT count(*) FROM gpud_events", -1, &st, nullptr) == SQLITE_OK &&
       sqlite3_step(st) == SQLITE_ROW && sqlite3_column_int(st, 0) >= count;
  sqlite3_finalize(st);
  sqlite3_close(db);
  return ok;
}

// 200,000 stored Xids (one tenant's recurring application errors) once took the daemon's peak
// RSS past 500 MiB, as every Xid check read its whole lookback. Now the checks read a digest:
// after three checks over the history (each new Xid line re-checks at once) the daemon's peak
// stays near an idle one's, and the verdict names the new Xids.
TEST(StoreE2E, ALongXidHistoryLeavesTheDaemonsMemoryFlat) {
  TempTree tree;
  const std::string data = tree.path + "/data";
  KmsgFile kmsg(tree.path + "/kmsg");
  int64_t idle_kib = -1;
  {
    DaemonProcess d(data, {}, false, {kmsg.env()});  // creates the database
    ASSERT_TRUE(d.ready()) << d.log();
    std::this_thread::sleep_for(2s);
    idle_kib = testing_support::status_kib("VmHWM", std::to_string(d.pid()));
    EXPECT_EQ(d.stop(), 0);
  }
  ASSERT_TRUE(add_xid_history(data + "/gpud.state", 200000));
  DaemonProcess d(data, {}, false, {kmsg.env()});
  ASSERT_TRUE(d.ready()) << d.log();
  for (int i = 1; i <= 3; ++i) {
    kmsg.xid79(bus_id(i));
    nlohmann::json xid;
    ASSERT_TRUE(eventually(
        [&] {
          xid = component_state(d, kXid);
          return xid.value("health", "") == "Unhealthy" &&
                 xid.value("reason", "").find(bus_id(i)) != std::string::npos;
        },
        90s))  // a check reads 200,000 rows: seconds on a loaded machine, more at the first
        << xid.dump() << "\n"
        << d.log();
  }
  const int64_t peak_kib = testing_support::status_kib("VmHWM", std::to_string(d.pid()));
  std::cout << "gpud peak RSS: idle " << idle_kib / 1024 << " MiB, with 200,000 stored Xids "
            << peak_kib / 1024 << " MiB\n";
  ASSERT_GT(idle_kib, 0);
#if defined(GPUD_SANITIZED)
  std::cout << "NOTE: the RSS bound is not checked under AddressSanitizer\n";
#else
  EXPECT_LT(peak_kib, idle_kib + 64 * 1024)
      << "the daemon's peak RSS grew by " << (peak_kib - idle_kib) / 1024 << " MiB";
#endif
  EXPECT_EQ(d.stop(), 0);
}

TEST(FilesE2E, DataDirIsCreatedPrivateAndAnExistingOnesModeIsKept) {
  TempTree tree;
  const std::string created = tree.path + "/created";
  const std::string private_dir = tree.path + "/private";
  const std::string sticky = tree.path + "/sticky";
  ASSERT_EQ(::mkdir(private_dir.c_str(), 0700), 0);
  ASSERT_EQ(::mkdir(sticky.c_str(), 0700), 0);
  ASSERT_EQ(::chmod(sticky.c_str(), 01777), 0);
  for (const auto& [dir, mode] : std::vector<std::pair<std::string, mode_t>>{
           {created, 0700}, {private_dir, 0700}, {sticky, 01777}}) {
    DaemonProcess d(dir);  // TLS on: the daemon writes its self-signed key into the data dir
    ASSERT_TRUE(d.ready()) << d.log();
    EXPECT_EQ(mode_of(dir), mode) << dir;
    // The WAL and its index exist while the daemon runs.
    for (const char* f : {"gpud.state", "gpud.state-wal", "gpud.state-shm", "gpud.key"})
      EXPECT_EQ(mode_of(dir + "/" + f), 0600u) << dir << "/" << f;
    EXPECT_EQ(d.stop(), 0);
    EXPECT_EQ(mode_of(dir), mode) << dir;
  }
}

}  // namespace
}  // namespace gpud::e2e
