#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <thread>

#include "core/time_util.h"
#include "store/database.h"
#include "store/event_store.h"
#include "store/metadata.h"
#include "store/metric_store.h"

namespace gpud::store {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using ::testing::HasSubstr;

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "gpud-store-test-XXXXXX").string();
    if (mkdtemp(tmpl.data()) != nullptr) path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) fs::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string file(const std::string& name) const { return (fs::path(path_) / name).string(); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

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
  EXPECT_THAT(db.error().message,
              HasSubstr("database schema version 7 is newer than this gpud supports (1); "
                        "upgrade gpud or use another --data-dir"));
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

}  // namespace
}  // namespace gpud::store
