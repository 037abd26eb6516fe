#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <thread>

#include "core/time_util.h"
#include "store/database.h"
#include "store/event_store.h"
#include "store/metadata.h"
#include "store/metric_store.h"
#include "testing/scribble.h"
#include "testing/temp_dir.h"

namespace gpud::store {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using ::testing::HasSubstr;

using testing_support::TempDir;

std::unique_ptr<Database> memory_db() {
  auto db = Database::open_in_memory();
  EXPECT_TRUE(db.ok()) << (db.ok() ? "" : db.error().message);
  return std::move(db).value();
}

Event make_event(std::string component, int64_t unix_s, std::string name,
                 nlohmann::json extra = nlohmann::json::object()) {
  Event e;
  e.component = std::move(component);
  e.time = from_unix_seconds(unix_s);
  e.name = std::move(name);
  e.type = EventType::kWarning;
  e.message = "msg";
  e.extra_info = std::move(extra);
  return e;
}

// An event whose row needs pages of its own (overflow pages), so that a database that may not grow
// refuses it whatever free space the table's pages still have.
Event big_event(int i) {
  Event e = make_event("accelerator-nvidia-error-xid", 1000 + i, "error_xid", {{"i", i}});
  e.message = "Xid " + std::to_string(i) + " " + std::string(6000, 'x');
  return e;
}

// Caps the database at its current size: SQLite then fails a write that needs a new page with
// SQLITE_FULL, "database or disk is full", exactly as on a full file system.
void cap_size(Database& db) {
  auto pages = db.size_bytes();
  ASSERT_TRUE(pages.ok());
  ASSERT_TRUE(db.exec("PRAGMA max_page_count = " + std::to_string(*pages / 4096)).ok());
}
void uncap_size(Database& db) { ASSERT_TRUE(db.exec("PRAGMA max_page_count = 1000000").ok()); }

// The events' "i" in the order the table holds them (by id), read through a second connection.
std::vector<int> stored_order(const std::string& path) {
  sqlite3* db = nullptr;
  std::vector<int> out;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK) {
    sqlite3_stmt* st = nullptr;
    sqlite3_prepare_v2(db, "SELECT extra_info FROM gpud_events ORDER BY id", -1, &st, nullptr);
    while (st != nullptr && sqlite3_step(st) == SQLITE_ROW) {
      auto j = nlohmann::json::parse(reinterpret_cast<const char*>(sqlite3_column_text(st, 0)));
      out.push_back(j.value("i", -1));
    }
    sqlite3_finalize(st);
  }
  sqlite3_close(db);
  return out;
}

mode_t mode_of(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return 0;
  return st.st_mode & 07777;
}

std::vector<int64_t> times_of(const std::vector<Event>& events) {
  std::vector<int64_t> out;
  for (const auto& e : events) out.push_back(to_unix_seconds(e.time));
  return out;
}

TEST(EventStore, IdenticalEventIsStoredOnce) {
  auto db = memory_db();
  EventStore events(*db);
  Event e = make_event("cpu", 1000, "overheat", {{"b", 2}, {"a", "x"}});
  auto first = events.insert(e);
  ASSERT_TRUE(first.ok()) << first.error().message;
  EXPECT_TRUE(*first);
  // Sub-second differences do not make a new event: times are stored to the second.
  e.time += 300ms;
  auto second = events.insert(e);
  ASSERT_TRUE(second.ok());
  EXPECT_FALSE(*second);

  auto all = events.query("", TimePoint::min(), TimePoint::max());
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 1u);
  const Event& got = all->front();
  EXPECT_EQ(got.component, "cpu");
  EXPECT_EQ(to_unix_seconds(got.time), 1000);
  EXPECT_EQ(got.name, "overheat");
  EXPECT_EQ(got.type, EventType::kWarning);
  EXPECT_EQ(got.message, "msg");
  EXPECT_EQ(got.extra_info, (nlohmann::json{{"a", "x"}, {"b", 2}}));
}

TEST(EventStore, BatchSaysWhichEventsWereNewAndSkipsStoredOnes) {
  auto db = memory_db();
  EventStore store(*db);
  ASSERT_TRUE(store.insert(make_event("os", 100, "reboot")).ok());
  auto added = store.insert_batch({make_event("os", 100, "reboot"), make_event("os", 200, "reboot"),
                                   make_event("os", 200, "reboot")});
  ASSERT_TRUE(added.ok()) << added.error().message;
  EXPECT_EQ(*added, (std::vector<bool>{false, true, false}));
  EXPECT_EQ(store.query("os", TimePoint::min(), TimePoint::max())->size(), 2u);
}

TEST(EventStore, BatchOnAReadOnlyDatabaseStoresNothing) {
  auto db = memory_db();
  EventStore store(*db);
  ASSERT_TRUE(db->exec("PRAGMA query_only=1").ok());
  auto added = store.insert_batch({make_event("os", 100, "reboot"), make_event("os", 200, "x")});
  EXPECT_FALSE(added.ok());
  ASSERT_TRUE(db->exec("PRAGMA query_only=0").ok());
  EXPECT_TRUE(store.query("os", TimePoint::min(), TimePoint::max())->empty());
  EXPECT_EQ(store.backlog_size(), 0u);
}

TEST(EventStore, DifferentExtraInfoIsADifferentEvent) {
  auto db = memory_db();
  EventStore events(*db);
  EXPECT_TRUE(*events.insert(make_event("gpu", 1000, "xid", {{"xid", 79}})));
  EXPECT_TRUE(*events.insert(make_event("gpu", 1000, "xid", {{"xid", 48}})));
  EXPECT_TRUE(*events.insert(make_event("gpu", 1000, "xid")));
  EXPECT_FALSE(*events.insert(make_event("gpu", 1000, "xid", {{"xid", 79}})));
  EXPECT_EQ(events.query("gpu", TimePoint::min(), TimePoint::max())->size(), 3u);
}

TEST(EventStore, QueryWindowExcludesSinceIncludesUntil) {
  auto db = memory_db();
  EventStore events(*db);
  for (int64_t t : {99, 100, 101, 150, 200, 201}) {
    ASSERT_TRUE(events.insert(make_event("disk", t, "e")).ok());
  }
  auto got = events.query("disk", from_unix_seconds(100), from_unix_seconds(200));
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(times_of(*got), (std::vector<int64_t>{200, 150, 101}));

  // Fractional bounds: since 100.5 excludes 100, until 200.5 includes 200.
  got = events.query("disk", from_unix_seconds(100) + 500ms, from_unix_seconds(200) + 500ms);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(times_of(*got), (std::vector<int64_t>{200, 150, 101}));
}

TEST(EventStore, QueryReturnsNewestFirstAcrossComponents) {
  auto db = memory_db();
  EventStore events(*db);
  ASSERT_TRUE(events.insert(make_event("a", 10, "e")).ok());
  ASSERT_TRUE(events.insert(make_event("b", 30, "e")).ok());
  ASSERT_TRUE(events.insert(make_event("a", 20, "e")).ok());
  auto all = events.query("", TimePoint::min(), TimePoint::max());
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(times_of(*all), (std::vector<int64_t>{30, 20, 10}));
  auto only_a = events.query("a", TimePoint::min(), TimePoint::max());
  ASSERT_TRUE(only_a.ok());
  EXPECT_EQ(times_of(*only_a), (std::vector<int64_t>{20, 10}));
}

TEST(EventStore, PurgeTouchesOnlyTheNamedComponent) {
  auto db = memory_db();
  EventStore events(*db);
  for (int64_t t : {10, 20, 30}) {
    ASSERT_TRUE(events.insert(make_event("a", t, "e")).ok());
    ASSERT_TRUE(events.insert(make_event("b", t, "e")).ok());
  }
  auto n = events.purge("a", from_unix_seconds(30));
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 2);
  EXPECT_EQ(times_of(*events.query("a", TimePoint::min(), TimePoint::max())),
            (std::vector<int64_t>{30}));
  EXPECT_EQ(events.query("b", TimePoint::min(), TimePoint::max())->size(), 3u);

  n = events.purge("a", TimePoint::max());
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 1);
  EXPECT_TRUE(events.query("a", TimePoint::min(), TimePoint::max())->empty());
  EXPECT_EQ(events.query("b", TimePoint::min(), TimePoint::max())->size(), 3u);
}

TEST(EventStore, RetentionDeletesOldEventsOfEveryComponent) {
  auto db = memory_db();
  EventStore events(*db);
  const int64_t now = 1'700'000'000;
  for (const char* c : {"accelerator-nvidia-xid", "cpu", "disk", "os", "memory"}) {
    ASSERT_TRUE(events.insert(make_event(c, now - 3 * 86400, "old")).ok());
    ASSERT_TRUE(events.insert(make_event(c, now - 3600, "new")).ok());
  }
  auto n = events.enforce_retention(std::chrono::hours(24), from_unix_seconds(now));
  ASSERT_TRUE(n.ok()) << n.error().message;
  EXPECT_EQ(*n, 5);
  auto left = events.query("", TimePoint::min(), TimePoint::max());
  ASSERT_TRUE(left.ok());
  ASSERT_EQ(left->size(), 5u);
  for (const auto& e : *left) EXPECT_EQ(e.name, "new") << e.component;

  // A retention longer than the epoch keeps everything instead of overflowing.
  n = events.enforce_retention(std::chrono::seconds::max(), from_unix_seconds(now));
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 0);
}

TEST(EventStore, LatestReturnsTheNewestEventWithThatName) {
  auto db = memory_db();
  EventStore events(*db);
  auto none = events.latest("os", "reboot");
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
  ASSERT_TRUE(events.insert(make_event("os", 100, "reboot")).ok());
  ASSERT_TRUE(events.insert(make_event("os", 300, "reboot")).ok());
  ASSERT_TRUE(events.insert(make_event("os", 400, "other")).ok());
  ASSERT_TRUE(events.insert(make_event("cpu", 500, "reboot")).ok());
  auto got = events.latest("os", "reboot");
  ASSERT_TRUE(got.ok());
  ASSERT_TRUE(got->has_value());
  EXPECT_EQ(to_unix_seconds((*got)->time), 300);
}

TEST(EventStore, MalformedStoredExtraInfoReadsAsEmptyObject) {
  auto db = memory_db();
  EventStore events(*db);
  ASSERT_TRUE(db->exec("INSERT INTO gpud_events(component, unix_seconds, name, type, message, "
                       "extra_info) VALUES('cpu', 5, 'e', 'Bogus', 'm', '{not json')")
                  .ok());
  auto got = events.query("cpu", TimePoint::min(), TimePoint::max());
  ASSERT_TRUE(got.ok());
  ASSERT_EQ(got->size(), 1u);
  EXPECT_TRUE(got->front().extra_info.is_object());
  EXPECT_TRUE(got->front().extra_info.empty());
  EXPECT_EQ(got->front().type, EventType::kUnknown);
}

TEST(EventStore, InvalidUtf8InExtraInfoIsStoredNotThrown) {
  auto db = memory_db();
  EventStore events(*db);
  auto r = events.insert(make_event("os", 1, "kmsg", {{"line", std::string("bad \xff byte")}}));
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(*r);
}

TEST(EventStore, ConcurrentInsertsFromFourThreadsAllLand) {
  TempDir dir;
  auto db = Database::open(dir.file("gpud.state"));
  ASSERT_TRUE(db.ok()) << db.error().message;
  EventStore events(**db);
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&events, &failures, t] {
      for (int i = 0; i < 100; ++i) {
        auto r = events.insert(make_event("c" + std::to_string(t), 1000 + i, "e"));
        if (!r.ok() || !*r) ++failures;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  auto all = events.query("", TimePoint::min(), TimePoint::max());
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->size(), 400u);
}

MetricSample sample(int64_t ms, std::string component, std::string name, double value,
                    std::map<std::string, std::string> labels = {}) {
  return MetricSample{ms, std::move(component), std::move(name), std::move(labels), value};
}

TEST(MetricStore, InsertAndQueryRoundTripLabelsInTimeThenNameOrder) {
  auto db = memory_db();
  MetricStore metrics(*db);
  ASSERT_TRUE(metrics
                  .insert({sample(2000, "gpu", "temp_c", 70, {{"uuid", "GPU-1"}, {"index", "0"}}),
                           sample(1000, "gpu", "power_mw", 1.5e5), sample(1000, "cpu", "load", 0.5),
                           sample(1000, "gpu", "b_name", 3, {{"k", "va\"l"}})})
                  .ok());
  auto all = metrics.query("", TimePoint::min());
  ASSERT_TRUE(all.ok()) << all.error().message;
  ASSERT_EQ(all->size(), 4u);
  EXPECT_EQ((*all)[0].name, "b_name");
  EXPECT_EQ((*all)[0].labels, (std::map<std::string, std::string>{{"k", "va\"l"}}));
  EXPECT_EQ((*all)[1].name, "load");
  EXPECT_EQ((*all)[2].name, "power_mw");
  EXPECT_TRUE((*all)[2].labels.empty());
  EXPECT_DOUBLE_EQ((*all)[2].value, 1.5e5);
  EXPECT_EQ((*all)[3].unix_ms, 2000);
  EXPECT_EQ((*all)[3].component, "gpu");
  EXPECT_EQ((*all)[3].labels,
            (std::map<std::string, std::string>{{"index", "0"}, {"uuid", "GPU-1"}}));

  auto gpu_since = metrics.query("gpu", from_unix_ms(1000) + 1us);
  ASSERT_TRUE(gpu_since.ok());
  ASSERT_EQ(gpu_since->size(), 1u);
  EXPECT_EQ(gpu_since->front().name, "temp_c");
  EXPECT_EQ(metrics.query("gpu", from_unix_ms(1000))->size(), 3u);  // since is inclusive
}

TEST(MetricStore, QueryPagesAreSlicesWithinTheWindow) {
  auto db = Database::open_in_memory();
  ASSERT_TRUE(db.ok());
  MetricStore store(**db);
  std::vector<MetricSample> samples;
  for (int i = 0; i < 10; ++i) samples.push_back({1000 + i, "cpu", "m", {}, 1.0 * i});
  ASSERT_TRUE(store.insert(samples).ok());
  auto page = store.query_page("cpu", from_unix_ms(1001), from_unix_ms(1008), 2, 3);
  ASSERT_TRUE(page.ok());
  std::vector<int64_t> times;
  for (const auto& s : *page) times.push_back(s.unix_ms);
  EXPECT_EQ(times, (std::vector<int64_t>{1003, 1004, 1005}));
  page = store.query_page("cpu", from_unix_ms(1001), from_unix_ms(1008), 6, 10);
  ASSERT_TRUE(page.ok());
  ASSERT_EQ(page->size(), 2u);  // 1007 and 1008: until is inclusive
  EXPECT_EQ(page->back().unix_ms, 1008);
}

TEST(MetricStore, SameSeriesAtSameTimeIsReplaced) {
  auto db = memory_db();
  MetricStore metrics(*db);
  ASSERT_TRUE(metrics.insert({sample(1000, "cpu", "load", 1, {{"a", "b"}})}).ok());
  ASSERT_TRUE(metrics.insert({sample(1000, "cpu", "load", 2, {{"a", "b"}})}).ok());
  auto got = metrics.query("cpu", TimePoint::min());
  ASSERT_TRUE(got.ok());
  ASSERT_EQ(got->size(), 1u);
  EXPECT_DOUBLE_EQ(got->front().value, 2);
}

TEST(MetricStore, NanSampleIsSkippedWithoutFailingTheBatch) {
  auto db = memory_db();
  MetricStore metrics(*db);
  ASSERT_TRUE(
      metrics.insert({sample(1, "cpu", "nan", std::nan("")), sample(1, "cpu", "ok", 1)}).ok());
  auto got = metrics.query("", TimePoint::min());
  ASSERT_TRUE(got.ok());
  ASSERT_EQ(got->size(), 1u);
  EXPECT_EQ(got->front().name, "ok");
}

TEST(MetricStore, PurgeDeletesSamplesBeforeTheCutoff) {
  auto db = memory_db();
  MetricStore metrics(*db);
  ASSERT_TRUE(metrics
                  .insert({sample(1000, "cpu", "load", 1), sample(2000, "cpu", "load", 2),
                           sample(3000, "disk", "used", 3)})
                  .ok());
  auto n = metrics.purge(from_unix_ms(2000));
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 1);
  EXPECT_EQ(metrics.query("", TimePoint::min())->size(), 2u);
  n = metrics.purge(TimePoint::max());
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 2);
}

TEST(Metadata, GetMissingThenSetAndOverwrite) {
  auto db = memory_db();
  Metadata meta(*db);
  auto missing = meta.get(kKeyMachineId);
  ASSERT_TRUE(missing.ok());
  EXPECT_FALSE(missing->has_value());
  ASSERT_TRUE(meta.set(kKeyMachineId, "abc").ok());
  ASSERT_TRUE(meta.set(kKeyMachineId, "def").ok());
  auto got = meta.get(kKeyMachineId);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->value_or(""), "def");
}

TEST(Metadata, AllListsEveryKeyInKeyOrderWithTheSchemaVersion) {
  auto db = memory_db();
  Metadata meta(*db);
  ASSERT_TRUE(meta.set("zone", "a").ok());
  ASSERT_TRUE(meta.set(kKeyMachineId, "m1").ok());
  auto all = meta.all();
  ASSERT_TRUE(all.ok());
  std::map<std::string, std::string> expected{
      {kKeyMachineId, "m1"}, {kKeySchemaVersion, std::to_string(kSchemaVersion)}, {"zone", "a"}};
  EXPECT_EQ(*all, expected);
}

TEST(EventStore, AcknowledgeMarksTheComponentsEventsUpToATimeAndKeepsThem) {
  auto db = memory_db();
  EventStore events(*db);
  ASSERT_TRUE(events.insert(make_event("xid", 100, "a")).ok());
  ASSERT_TRUE(events.insert(make_event("xid", 200, "b")).ok());
  ASSERT_TRUE(events.insert(make_event("cpu", 100, "c")).ok());
  const Acknowledgement ack{from_unix_seconds(150) + 300ms, "uid:0"};
  auto n = events.acknowledge("xid", from_unix_seconds(150), ack);
  ASSERT_TRUE(n.ok()) << n.error().message;
  EXPECT_EQ(*n, 1);
  auto xid = events.query("xid", TimePoint::min(), TimePoint::max());
  ASSERT_TRUE(xid.ok());
  ASSERT_EQ(xid->size(), 2u);
  EXPECT_FALSE((*xid)[0].acknowledged) << "after `until`";
  ASSERT_TRUE((*xid)[1].acknowledged);
  EXPECT_EQ((*xid)[1].acknowledged->by, "uid:0");
  EXPECT_EQ((*xid)[1].acknowledged->time, from_unix_seconds(150));
  EXPECT_FALSE(events.query("cpu", TimePoint::min(), TimePoint::max())->front().acknowledged);
  // Acknowledging again keeps the first acknowledgement.
  EXPECT_EQ(*events.acknowledge("xid", TimePoint::max(), {from_unix_seconds(300), "token"}), 1);
  xid = events.query("xid", TimePoint::min(), TimePoint::max());
  EXPECT_EQ((*xid)[1].acknowledged->by, "uid:0");
  EXPECT_EQ((*xid)[0].acknowledged->by, "token");
}

TEST(EventStore, AnAcknowledgedRowIsNotStoredAgainByAnIdenticalInsert) {
  auto db = memory_db();
  EventStore events(*db);
  ASSERT_TRUE(events.insert(make_event("xid", 100, "a")).ok());
  ASSERT_TRUE(events.acknowledge("xid", TimePoint::max(), {from_unix_seconds(150), "token"}).ok());
  EXPECT_FALSE(*events.insert(make_event("xid", 100, "a")));
  auto all = events.query("xid", TimePoint::min(), TimePoint::max());
  ASSERT_EQ(all->size(), 1u);
  EXPECT_TRUE(all->front().acknowledged);
}

TEST(Database, VersionOneDatabaseIsUpgradedKeepingItsEvents) {
  TempDir dir;
  const std::string path = dir.file("gpud.state");
  {
    sqlite3* raw = nullptr;
    ASSERT_EQ(sqlite3_open(path.c_str(), &raw), SQLITE_OK);
    const char* v1 =
        "CREATE TABLE gpud_metadata (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;"
        "INSERT INTO gpud_metadata VALUES('schema_version', '1');"
        "CREATE TABLE gpud_events (id INTEGER PRIMARY KEY, component TEXT NOT NULL, "
        "unix_seconds INTEGER NOT NULL, name TEXT NOT NULL, type TEXT NOT NULL, "
        "message TEXT NOT NULL DEFAULT '', extra_info TEXT NOT NULL DEFAULT '{}');"
        "INSERT INTO gpud_events(component, unix_seconds, name, type, message) "
        "VALUES('xid', 100, 'error_xid', 'Fatal', 'Xid 79');";
    ASSERT_EQ(sqlite3_exec(raw, v1, nullptr, nullptr, nullptr), SQLITE_OK);
    sqlite3_close(raw);
  }
  auto db = Database::open(path);
  ASSERT_TRUE(db.ok()) << db.error().message;
  EXPECT_EQ(Metadata(**db).get(kKeySchemaVersion)->value_or(""), std::to_string(kSchemaVersion));
  EventStore events(**db);
  auto old = events.query("xid", TimePoint::min(), TimePoint::max());
  ASSERT_TRUE(old.ok()) << old.error().message;
  ASSERT_EQ(old->size(), 1u);
  EXPECT_EQ(old->front().message, "Xid 79");
  EXPECT_FALSE(old->front().acknowledged);
  ASSERT_TRUE(events.acknowledge("xid", TimePoint::max(), {from_unix_seconds(200), "token"}).ok());
  EXPECT_TRUE(events.query("xid", TimePoint::min(), TimePoint::max())->front().acknowledged);
}

TEST(Metadata, KernelLogWatermarksRoundTripAndAMalformedOneIsAnError) {
  auto db = memory_db();
  Metadata meta(*db);
  EXPECT_TRUE(meta.kernel_log_watermarks()->empty());
  const KernelLogWatermark w{"boot-a", 1234, {from_unix_seconds(100), "uid:0"}};
  ASSERT_TRUE(meta.set_kernel_log_watermark("accelerator-nvidia-error-xid", w).ok());
  ASSERT_TRUE(meta.set(kKeyMachineId, "not a watermark").ok());
  auto marks = meta.kernel_log_watermarks();
  ASSERT_TRUE(marks.ok()) << marks.error().message;
  ASSERT_EQ(marks->size(), 1u);
  EXPECT_EQ(marks->at("accelerator-nvidia-error-xid"), w);
  ASSERT_TRUE(meta.set(std::string(kKeyKernelLogWatermarkPrefix) + "os", "{}").ok());
  auto bad = meta.kernel_log_watermarks();
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.error().message, HasSubstr("os: "));
}

TEST(Database, RecordsSchemaVersion) {
  TempDir dir;
  auto db = Database::open(dir.file("gpud.state"));
  ASSERT_TRUE(db.ok()) << db.error().message;
  EXPECT_TRUE((*db)->quarantined_path().empty());
  EXPECT_EQ((*db)->path(), dir.file("gpud.state"));
  EXPECT_EQ(Metadata(**db).get(kKeySchemaVersion)->value_or(""), std::to_string(kSchemaVersion));
  auto mem = memory_db();
  EXPECT_EQ(Metadata(*mem).get(kKeySchemaVersion)->value_or(""), std::to_string(kSchemaVersion));
  EXPECT_TRUE(mem->path().empty());
}

TEST(Database, RefusesNewerSchemaVersionWithClearMessage) {
  TempDir dir;
  const std::string path = dir.file("gpud.state");
  {
    auto db = Database::open(path);
    ASSERT_TRUE(db.ok());
    ASSERT_TRUE(Metadata(**db).set(kKeySchemaVersion, "7").ok());
  }
  auto db = Database::open(path);
  ASSERT_FALSE(db.ok());
  EXPECT_THAT(
      db.error().message,
      HasSubstr("database schema version 7 is newer than this gpud supports (" +
                std::to_string(kSchemaVersion) + "); upgrade gpud or use another --data-dir"));
  EXPECT_FALSE(fs::exists(path + ".corrupt-0"));  // refused, not quarantined
  for (const auto& entry : fs::directory_iterator(dir.path())) {
    EXPECT_THAT(entry.path().string(), ::testing::Not(HasSubstr(".corrupt-")));
  }
}

TEST(Database, CorruptFileIsMovedAsideAndAFreshOneWorks) {
  TempDir dir;
  const std::string path = dir.file("gpud.state");
  {
    std::ofstream out(path, std::ios::binary);
    out << std::string(8192, 'x');
    std::ofstream wal(path + "-wal", std::ios::binary);
    wal << "junk";
  }
  auto db = Database::open(path);
  ASSERT_TRUE(db.ok()) << db.error().message;
  const std::string moved = (*db)->quarantined_path();
  EXPECT_THAT(moved, HasSubstr(path + ".corrupt-"));
  ASSERT_TRUE(fs::exists(moved));
  EXPECT_EQ(fs::file_size(moved), 8192u);
  const std::string suffix = moved.substr(path.size());
  EXPECT_TRUE(fs::exists(path + "-wal" + suffix));

  EventStore events(**db);
  ASSERT_TRUE(events.insert(make_event("cpu", 1, "e")).ok());
  EXPECT_EQ(events.query("", TimePoint::min(), TimePoint::max())->size(), 1u);
}

TEST(Database, DamagedPagesBehindAValidHeaderAreQuarantined) {
  TempDir dir;
  const std::string path = dir.file("gpud.state");
  {
    auto db = Database::open(path);
    ASSERT_TRUE(db.ok());
    EventStore events(**db);
    for (int i = 0; i < 500; ++i) {
      ASSERT_TRUE(events.insert(make_event("cpu", i, "e", {{"i", std::string(64, 'p')}})).ok());
    }
    ASSERT_TRUE((*db)->exec("PRAGMA wal_checkpoint(TRUNCATE)").ok());
  }
  const auto size = fs::file_size(path);
  ASSERT_GT(size, 16384u);
  {
    // Keep page 1 (the header and schema) intact; scribble over the pages after it.
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(4096);
    std::string junk(size - 4096, '\x5a');
    f.write(junk.data(), static_cast<std::streamsize>(junk.size()));
  }
  auto db = Database::open(path);
  ASSERT_TRUE(db.ok()) << db.error().message;
  EXPECT_THAT((*db)->quarantined_path(), HasSubstr(".corrupt-"));
  EXPECT_TRUE(fs::exists((*db)->quarantined_path()));
  EXPECT_TRUE(EventStore(**db).query("", TimePoint::min(), TimePoint::max())->empty());
}

// Reopening a database of several MiB (its quick_check reads every page) and reading all of it
// keeps SQLite's page cache at its 512 KiB bound, not the 2 MiB default.
TEST(Database, PageCacheStaysBoundedOnALargeDatabase) {
  TempDir dir;
  const std::string path = dir.file("gpud.state");
  {
    auto db = Database::open(path);
    ASSERT_TRUE(db.ok()) << db.error().message;
    EventStore events(**db);
    const std::string filler(2000, 'x');
    for (int i = 0; i < 3000; ++i)
      ASSERT_TRUE(events.insert(make_event("os", i, "reboot", {{"filler", filler}})).ok());
  }
  ASSERT_GT(std::filesystem::file_size(path), 4u << 20);  // closing checkpointed the WAL
  auto db = Database::open(path);
  ASSERT_TRUE(db.ok()) << db.error().message;
  ASSERT_TRUE((*db)->exec("SELECT count(*) FROM gpud_events WHERE extra_info LIKE '%y%'").ok());
  int used = 0, highwater = 0;
  ASSERT_EQ(sqlite3_db_status((*db)->handle(), SQLITE_DBSTATUS_CACHE_USED, &used, &highwater, 0),
            SQLITE_OK);
  EXPECT_GT(used, 64 << 10);   // it does cache
  EXPECT_LT(used, 700 << 10);  // 512 KiB of pages and their headers
}

TEST(Database, EventsPersistAcrossCloseAndReopen) {
  TempDir dir;
  const std::string path = dir.file("gpud.state");
  {
    auto db = Database::open(path);
    ASSERT_TRUE(db.ok()) << db.error().message;
    EventStore events(**db);
    ASSERT_TRUE(events.insert(make_event("os", 42, "reboot", {{"boot_id", "abc"}})).ok());
    ASSERT_TRUE(MetricStore(**db).insert({sample(5, "cpu", "load", 1)}).ok());
  }
  auto db = Database::open(path);
  ASSERT_TRUE(db.ok()) << db.error().message;
  EXPECT_TRUE((*db)->quarantined_path().empty());
  auto got = EventStore(**db).latest("os", "reboot");
  ASSERT_TRUE(got.ok());
  ASSERT_TRUE(got->has_value());
  EXPECT_EQ((*got)->extra_info, (nlohmann::json{{"boot_id", "abc"}}));
  EXPECT_EQ(MetricStore(**db).query("", TimePoint::min())->size(), 1u);
}

TEST(Database, UnwritablePathIsAnErrorNotACrash) {
  TempDir dir;
  const std::string plain_file = dir.file("not-a-dir");
  { std::ofstream(plain_file) << "x"; }
  // A path below a regular file cannot be created, even by root.
  const std::string path = plain_file + "/sub/gpud.state";
  auto db = Database::open(path);
  ASSERT_FALSE(db.ok());
  EXPECT_THAT(db.error().message, HasSubstr(path));
  auto missing_dir = Database::open(dir.file("missing/gpud.state"));
  ASSERT_FALSE(missing_dir.ok());
  EXPECT_THAT(missing_dir.error().message, HasSubstr("missing/gpud.state"));
}

TEST(Database, SizeVacuumAndExec) {
  TempDir dir;
  auto db = Database::open(dir.file("gpud.state"));
  ASSERT_TRUE(db.ok());
  auto size = (*db)->size_bytes();
  ASSERT_TRUE(size.ok());
  EXPECT_GT(*size, 0);
  EXPECT_TRUE((*db)->vacuum().ok());
  auto bad = (*db)->exec("SELEC nonsense");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.error().message, HasSubstr("syntax error"));
}

TEST(EventStore, FullDatabaseKeepsEventsInMemoryAndStoresEachOnceInOrderWhenSpaceReturns) {
  TempDir dir;
  const std::string path = dir.file("gpud.state");
  auto db = Database::open(path);
  ASSERT_TRUE(db.ok()) << db.error().message;
  MetricRegistry metrics;
  (*db)->set_metrics(&metrics);
  EventStore events(**db);
  ASSERT_TRUE(events.insert(big_event(0)).value_or(false));
  cap_size(**db);

  for (int i = 1; i <= 20; ++i) {
    auto r = events.insert(big_event(i));
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_TRUE(*r) << "event " << i << " was not taken as new";
  }
  DatabaseHealth h = (*db)->health();
  EXPECT_FALSE(h.writable);
  EXPECT_THAT(h.last_error, HasSubstr("database or disk is full"));
  EXPECT_GE(h.errors_by_op["insert"], 20u);
  EXPECT_EQ(events.backlog_size(), 20u);
  EXPECT_THAT(metrics.prometheus_text(), HasSubstr("gpud_store_event_backlog 20\n"));
  EXPECT_THAT(metrics.prometheus_text(), HasSubstr("gpud_store_errors_total{op=\"insert\"}"));
  EXPECT_EQ(stored_order(path), std::vector<int>{0});

  // Readers see the waiting events with the stored one, newest first.
  auto all = events.query("", TimePoint::min(), TimePoint::max());
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 21u);
  EXPECT_EQ(all->front().extra_info.value("i", -1), 20);
  EXPECT_EQ(all->back().extra_info.value("i", -1), 0);
  // Neither a waiting nor a stored event is taken twice.
  EXPECT_FALSE(events.insert(big_event(7)).value_or(true));
  EXPECT_FALSE(events.insert(big_event(0)).value_or(true));
  EXPECT_EQ(events.backlog_size(), 20u);
  // Still full: a retry keeps all of them waiting, in order.
  EXPECT_EQ(events.retry(), 20u);

  uncap_size(**db);
  EXPECT_EQ(events.retry(), 0u);
  std::vector<int> expected;
  for (int i = 0; i <= 20; ++i) expected.push_back(i);
  EXPECT_EQ(stored_order(path), expected);
  EXPECT_TRUE((*db)->health().writable);
  EXPECT_EQ(events.query("", TimePoint::min(), TimePoint::max())->size(), 21u);
  EXPECT_THAT(metrics.prometheus_text(), HasSubstr("gpud_store_event_backlog 0\n"));
}

// Pages are slices of query()'s answer, read in SQL, and with waiting events merged in.
TEST(EventStore, QueryPagesAreSlicesOfTheWholeAnswerWithOrWithoutWaitingEvents) {
  TempDir dir;
  auto db = Database::open(dir.file("gpud.state"));
  ASSERT_TRUE(db.ok()) << db.error().message;
  EventStore events(**db);
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(events.insert(big_event(i)).value_or(false));
  auto check_pages = [&] {
    auto all = events.query("", TimePoint::min(), TimePoint::max());
    ASSERT_TRUE(all.ok());
    for (size_t offset : {0u, 3u, 9u, 30u})
      for (size_t limit : {1u, 4u, 100u}) {
        auto page = events.query_page("", TimePoint::min(), TimePoint::max(), offset, limit);
        ASSERT_TRUE(page.ok());
        std::vector<int64_t> want;
        for (size_t i = offset; i < all->size() && want.size() < limit; ++i)
          want.push_back(to_unix_seconds((*all)[i].time));
        EXPECT_EQ(times_of(*page), want) << "offset " << offset << " limit " << limit;
      }
  };
  check_pages();
  cap_size(**db);
  for (int i = 10; i < 15; ++i) ASSERT_TRUE(events.insert(big_event(i)).ok());
  ASSERT_EQ(events.backlog_size(), 5u);
  check_pages();
}

// ---- digest ----------------------------------------------------------------------------------

Event keyed_event(int64_t unix_s, nlohmann::json extra, EventType type = EventType::kWarning) {
  Event e = make_event("c", unix_s, "e", std::move(extra));
  e.type = type;
  e.message = "at " + std::to_string(unix_s);
  return e;
}

// A group is the events of one type and key between two splits; each keeps its first and last.
TEST(EventStore, DigestKeepsTheFirstAndLastEventOfEachGroupBetweenSplits) {
  auto db = memory_db();
  EventStore events(*db);
  for (const Event& e : {keyed_event(100, {{"k", 1}}), keyed_event(101, {{"k", 1}}),
                         keyed_event(102, {{"k", 1}}, EventType::kFatal),
                         keyed_event(103, {{"k", 2}}), keyed_event(104, {{"k", 1}}),
                         keyed_event(105, nlohmann::json::object()), keyed_event(106, {{"k", 1}}),
                         keyed_event(107, {{"k", 1}}), make_event("other", 103, "e", {{"k", 1}})})
    ASSERT_TRUE(events.insert(e).value_or(false));
  // An event at the split's very second falls before it.
  const std::vector<TimePoint> splits{from_unix_seconds(104)};
  auto d = events.digest("c", TimePoint{}, TimePoint::max(), {"/k"}, splits);
  ASSERT_TRUE(d.ok()) << d.error().message;
  EXPECT_EQ(d->total, 8u);
  EXPECT_EQ(times_of(d->events), (std::vector<int64_t>{107, 106, 105, 104, 103, 102, 100}));
  // What each kept event stands for: the oldest of a group itself, the newest the rest of it (104
  // stands for 101 and 104, the group's oldest being 100).
  EXPECT_EQ(d->counts, (std::vector<uint64_t>{1, 1, 1, 2, 1, 1, 1}));
  // The window is since < time <= until, as query()'s.
  d = events.digest("c", from_unix_seconds(100), from_unix_seconds(106), {"/k"}, splits);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->total, 6u);
  EXPECT_EQ(times_of(d->events), (std::vector<int64_t>{106, 105, 104, 103, 102, 101}));
  // Without keys or splits, one group per type.
  d = events.digest("c", TimePoint{}, TimePoint::max(), {}, {});
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(times_of(d->events), (std::vector<int64_t>{107, 102, 100}));
  EXPECT_EQ(d->counts, (std::vector<uint64_t>{6, 1, 1}));
  EXPECT_EQ(d->events.front().message, "at 107");
}

// Ten Xid events stored (1000..1009) and five (1010..1014) waiting behind a full disk.
void store_ten_and_hold_five_waiting(Database& db, EventStore& events) {
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(events.insert(big_event(i)).value_or(false));
  cap_size(db);
  for (int i = 10; i < 15; ++i) ASSERT_TRUE(events.insert(big_event(i)).ok());
}

// set-healthy's acknowledged events stay listed but are not judged again: the digest (what the
// Xid and SXid rules read) leaves them out, stored or waiting behind a full disk.
TEST(EventStore, DigestLeavesOutAcknowledgedEvents) {
  TempDir dir;
  auto db = Database::open(dir.file("gpud.state"));
  ASSERT_TRUE(db.ok()) << db.error().message;
  EventStore events(**db);
  store_ten_and_hold_five_waiting(**db, events);
  ASSERT_EQ(events.backlog_size(), 5u);
  uncap_size(**db);  // the marking of stored rows is a write
  auto acked = events.acknowledge("accelerator-nvidia-error-xid", from_unix_seconds(1011),
                                  Acknowledgement{from_unix_seconds(2000), "uid:0"});
  ASSERT_TRUE(acked.ok()) << acked.error().message;
  EXPECT_EQ(*acked, 12);
  auto d = events.digest("accelerator-nvidia-error-xid", TimePoint{}, TimePoint::max(), {}, {});
  ASSERT_TRUE(d.ok()) << d.error().message;
  EXPECT_EQ(d->total, 3u);
  EXPECT_EQ(times_of(d->events), (std::vector<int64_t>{1014, 1012}));
  auto all = events.query("accelerator-nvidia-error-xid", TimePoint{}, TimePoint::max());
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->size(), 15u);
}

TEST(EventStore, DigestKeysAreJsonPointersAndAMalformedRowHasNoValues) {
  auto db = memory_db();
  EventStore events(*db);
  ASSERT_TRUE(events.insert(keyed_event(100, {{"a", nlohmann::json::array({"x"})}})).ok());
  ASSERT_TRUE(events.insert(keyed_event(101, {{"a", nlohmann::json::array({"y"})}})).ok());
  ASSERT_TRUE(events.insert(keyed_event(102, {{"a", nlohmann::json::array({"x"})}})).ok());
  ASSERT_TRUE(events.insert(keyed_event(103, nlohmann::json::object())).ok());
  ASSERT_TRUE(
      db->exec("UPDATE gpud_events SET extra_info = '{not json' WHERE unix_seconds = 103").ok());
  ASSERT_TRUE(events.insert(keyed_event(104, nlohmann::json::object())).ok());
  ASSERT_TRUE(events.insert(keyed_event(105, nlohmann::json::object())).ok());
  auto d = events.digest("c", TimePoint{}, TimePoint::max(), {"/a/0"}, {});
  ASSERT_TRUE(d.ok()) << d.error().message;
  EXPECT_EQ(d->total, 6u);
  EXPECT_EQ(times_of(d->events), (std::vector<int64_t>{105, 103, 102, 101, 100}));
  EXPECT_TRUE(d->events[1].extra_info.empty());
  for (const char* bad : {"a", "/", "/a//b", "/a'b", "/a.b"}) {
    auto r = events.digest("c", TimePoint{}, TimePoint::max(), {bad}, {});
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_THAT(r.error().message, HasSubstr("unsupported key path")) << bad;
  }
}

// Waiting events take part where query() puts them: after the stored ones of their second.
TEST(EventStore, DigestTakesWaitingEventsInQueryOrder) {
  TempDir dir;
  auto db = Database::open(dir.file("gpud.state"));
  ASSERT_TRUE(db.ok()) << db.error().message;
  EventStore events(**db);
  store_ten_and_hold_five_waiting(**db, events);
  ASSERT_EQ(events.backlog_size(), 5u);
  auto d = events.digest("accelerator-nvidia-error-xid", TimePoint{}, TimePoint::max(), {},
                         {from_unix_seconds(1011)});
  ASSERT_TRUE(d.ok()) << d.error().message;
  EXPECT_EQ(d->total, 15u);
  EXPECT_EQ(times_of(d->events), (std::vector<int64_t>{1014, 1012, 1011, 1000}));
  EXPECT_EQ(d->events.front().extra_info.value("i", -1), 14);
}

TEST(EventStore, NewEventWaitsBehindOlderWaitingOnesSoTheOrderHolds) {
  TempDir dir;
  const std::string path = dir.file("gpud.state");
  auto db = Database::open(path);
  ASSERT_TRUE(db.ok());
  EventStore events(**db);
  cap_size(**db);
  ASSERT_TRUE(events.insert(big_event(1)).ok());
  ASSERT_TRUE(events.insert(big_event(2)).ok());
  uncap_size(**db);
  // The next insert writes the two waiting ones first, then itself.
  ASSERT_TRUE(events.insert(big_event(3)).value_or(false));
  EXPECT_EQ(events.backlog_size(), 0u);
  EXPECT_EQ(stored_order(path), (std::vector<int>{1, 2, 3}));
}

TEST(EventStore, FullBacklogDropsTheNewEventCountsItAndSaysSo) {
  TempDir dir;
  auto db = Database::open(dir.file("gpud.state"));
  ASSERT_TRUE(db.ok());
  MetricRegistry metrics;
  (*db)->set_metrics(&metrics);
  EventStore events(**db, 3);
  cap_size(**db);
  for (int i = 1; i <= 3; ++i) ASSERT_TRUE(events.insert(big_event(i)).ok());
  auto r = events.insert(big_event(4));
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.error().message, HasSubstr("event dropped"));
  EXPECT_EQ(events.dropped(), 1u);
  EXPECT_EQ(events.backlog_size(), 3u);
  EXPECT_THAT(metrics.prometheus_text(), HasSubstr("gpud_store_events_dropped_total 1\n"));
  uncap_size(**db);
  EXPECT_EQ(events.retry(), 0u);
  EXPECT_EQ(events.query("", TimePoint::min(), TimePoint::max())->size(), 3u);
}

TEST(EventStore, WaitingEventsArePurgedRetainedAndFoundAsTheLatest) {
  TempDir dir;
  auto db = Database::open(dir.file("gpud.state"));
  ASSERT_TRUE(db.ok());
  EventStore events(**db);
  Event stored_reboot = make_event("os", 100, "reboot");
  ASSERT_TRUE(events.insert(stored_reboot).ok());
  cap_size(**db);
  Event waiting_reboot = make_event("os", 200, "reboot");
  waiting_reboot.message = std::string(6000, 'r');  // needs new pages, so it waits
  ASSERT_TRUE(events.insert(waiting_reboot).value_or(false));
  ASSERT_EQ(events.backlog_size(), 1u);
  auto latest = events.latest("os", "reboot");
  ASSERT_TRUE(latest.ok() && latest->has_value());
  EXPECT_EQ(to_unix_seconds((*latest)->time), 200);

  // Retention forgets old waiting events as it deletes old stored ones.
  auto old = events.enforce_retention(std::chrono::seconds(50), from_unix_seconds(240));
  ASSERT_TRUE(old.ok()) << old.error().message;
  EXPECT_EQ(*old, 1);  // the stored one at 100
  EXPECT_EQ(events.backlog_size(), 1u);
  auto purged = events.purge("os", TimePoint::max());
  ASSERT_TRUE(purged.ok()) << purged.error().message;
  EXPECT_EQ(*purged, 1);  // the waiting one
  EXPECT_EQ(events.backlog_size(), 0u);
  EXPECT_FALSE(events.latest("os", "reboot")->has_value());
}

TEST(Database, CorruptionWhileRunningIsQuarantinedAndAFreshDatabaseTakesTheBacklog) {
  TempDir dir;
  const std::string path = dir.file("gpud.state");
  auto db = Database::open(path);
  ASSERT_TRUE(db.ok());
  MetricRegistry metrics;
  (*db)->set_metrics(&metrics);
  EventStore events(**db);
  ASSERT_TRUE(events.insert(big_event(0)).value_or(false));
  cap_size(**db);
  ASSERT_TRUE(events.insert(big_event(1)).value_or(false));
  ASSERT_TRUE(events.insert(big_event(2)).value_or(false));
  ASSERT_EQ(events.backlog_size(), 2u);

  // Damage the file and its WAL behind SQLite's back; every page it has is cached.
  testing::scribble(path);
  testing::scribble(path + "-wal");
  ASSERT_TRUE(events.insert(big_event(3)).value_or(false));

  DatabaseHealth h = (*db)->health();
  ASSERT_EQ(h.quarantines.size(), 1u) << h.last_error;
  const std::string moved = h.quarantines[0].path;
  EXPECT_THAT(moved, HasSubstr(path + ".corrupt-"));
  EXPECT_TRUE(fs::exists(moved));
  EXPECT_THAT(h.quarantines[0].reason, HasSubstr("not a database"));
  EXPECT_TRUE(h.usable);
  EXPECT_TRUE(h.writable);
  EXPECT_EQ(Database::quarantined_files(path), std::vector<std::string>{moved});
  // The waiting events and the new one are in the fresh database, in order; the one stored
  // before the damage stays in the quarantined file.
  EXPECT_EQ(events.backlog_size(), 0u);
  EXPECT_EQ(stored_order(path), (std::vector<int>{1, 2, 3}));
  EXPECT_EQ(mode_of(path), 0600u);
  EXPECT_THAT(metrics.prometheus_text(), HasSubstr("gpud_store_quarantines_total 1\n"));
  EXPECT_THAT(metrics.prometheus_text(), HasSubstr("gpud_store_errors_total{op=\"insert\"}"));
}

TEST(Database, UnusableUntilAFreshDatabaseCanBeCreatedThenTakesTheBacklog) {
  TempDir dir;
  const std::string data = dir.file("data");
  ASSERT_TRUE(fs::create_directory(data));
  const std::string path = data + "/gpud.state";
  auto db = Database::open(path);
  ASSERT_TRUE(db.ok());
  EventStore events(**db);
  ASSERT_TRUE(events.insert(big_event(0)).value_or(false));
  // Damaged, and its directory gone (taken away with the file in it): nothing to move aside and
  // nowhere to create a fresh database.
  testing::scribble(path);
  testing::scribble(path + "-wal");
  fs::rename(data, dir.file("gone"));
  ASSERT_TRUE(events.insert(big_event(1)).value_or(false)) << "the event must wait, not fail";
  DatabaseHealth h = (*db)->health();
  EXPECT_FALSE(h.usable);
  EXPECT_FALSE(h.writable);
  EXPECT_THAT(h.last_error, HasSubstr("open a fresh database " + path));
  EXPECT_GE(h.errors_by_op["reopen"], 1u);
  EXPECT_EQ(events.backlog_size(), 1u);
  // While unusable every operation fails at once, counted, without touching the old connection.
  auto q = Metadata(**db).get(kKeySchemaVersion);
  ASSERT_FALSE(q.ok());
  EXPECT_THAT(q.error().message, HasSubstr("the state database is unusable: open a fresh"));
  EXPECT_EQ((*db)->health().errors_by_op["metadata"], 1u);
  EXPECT_EQ(events.retry(), 1u);

  ASSERT_TRUE(fs::create_directory(data));
  EXPECT_EQ(events.retry(), 0u);
  h = (*db)->health();
  EXPECT_TRUE(h.usable);
  EXPECT_TRUE(h.writable);
  EXPECT_EQ(stored_order(path), std::vector<int>{1});
}

TEST(Database, MetricWriteOnADamagedFileQuarantinesItToo) {
  TempDir dir;
  const std::string path = dir.file("gpud.state");
  auto db = Database::open(path);
  ASSERT_TRUE(db.ok());
  MetricStore history(**db);
  ASSERT_TRUE(history.insert({sample(1, "cpu", "load", 1)}).ok());
  testing::scribble(path);
  testing::scribble(path + "-wal");
  // The failed write is retried once on the fresh database, so the sample is not lost either.
  auto r = history.insert({sample(2, "cpu", "load", 2)});
  EXPECT_TRUE(r.ok()) << r.error().message;
  DatabaseHealth h = (*db)->health();
  EXPECT_EQ(h.quarantines.size(), 1u);
  EXPECT_EQ(h.errors_by_op["metric_write"], 1u);
  EXPECT_EQ(history.query("", TimePoint::min())->size(), 1u);
}

TEST(Database, QuarantineAtOpenIsPartOfItsHealthAndCounted) {
  TempDir dir;
  const std::string path = dir.file("gpud.state");
  { std::ofstream(path, std::ios::binary) << std::string(8192, 'x'); }
  auto db = Database::open(path);
  ASSERT_TRUE(db.ok());
  MetricRegistry metrics;
  (*db)->set_metrics(&metrics);
  DatabaseHealth h = (*db)->health();
  ASSERT_EQ(h.quarantines.size(), 1u);
  EXPECT_EQ(h.quarantines[0].path, (*db)->quarantined_path());
  EXPECT_THAT(metrics.prometheus_text(), HasSubstr("gpud_store_quarantines_total 1\n"));
}

TEST(Database, StateFileAndItsWalAndShmArePrivate) {
  TempDir dir;
  const std::string path = dir.file("gpud.state");
  {
    // A file left by an older gpud, readable by everyone.
    std::ofstream(path).flush();
    ASSERT_EQ(::chmod(path.c_str(), 0644), 0);
  }
  auto db = Database::open(path);
  ASSERT_TRUE(db.ok()) << db.error().message;
  ASSERT_TRUE(EventStore(**db).insert(make_event("cpu", 1, "e")).ok());
  ASSERT_TRUE(fs::exists(path + "-wal"));
  ASSERT_TRUE(fs::exists(path + "-shm"));
  EXPECT_EQ(mode_of(path), 0600u);
  EXPECT_EQ(mode_of(path + "-wal"), 0600u);
  EXPECT_EQ(mode_of(path + "-shm"), 0600u);

  TempDir fresh;
  auto created = Database::open(fresh.file("gpud.state"));
  ASSERT_TRUE(created.ok());
  ASSERT_TRUE(Metadata(**created).set("k", "v").ok());
  EXPECT_EQ(mode_of(fresh.file("gpud.state")), 0600u);
  EXPECT_EQ(mode_of(fresh.file("gpud.state-wal")), 0600u);
  EXPECT_EQ(mode_of(fresh.file("gpud.state-shm")), 0600u);
}

}  // namespace
}  // namespace gpud::store
