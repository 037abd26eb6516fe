#include "store/gpud_state_import.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "core/time_util.h"
#include "store/database.h"
#include "store/event_store.h"
#include "store/metadata.h"
#include "store/statement.h"
#include "testing/gpud_state_file.h"
#include "testing/temp_dir.h"

namespace gpud::store {
namespace {

namespace fs = std::filesystem;
using testing::GpudStateFile;
using testing_support::TempDir;
using namespace std::chrono_literals;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr int64_t kNow = 1'760'000'000;  // the import's "now" in every test
const TimePoint kNowTime = from_unix_seconds(kNow);

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

struct GpudStore {
  std::unique_ptr<Database> db = std::move(Database::open_in_memory()).value();
  EventStore events{*db};
  Metadata metadata{*db};

  std::vector<Event> all(const std::string& component) const {
    auto r = events.query(component, TimePoint::min(), TimePoint::max());
    EXPECT_TRUE(r.ok());
    return r.ok() ? *r : std::vector<Event>{};
  }
};

GpudImportOptions options(std::vector<std::string> components = {
                              "os", "accelerator-nvidia-error-xid", "accelerator-nvidia-error-sxid",
                              "memory"}) {
  GpudImportOptions o;
  o.components = std::move(components);
  o.retention = 14 * 24h;
  o.now = kNowTime;
  return o;
}

TEST(GpudStateImport, TableNamesFollowGpudsRule) {
  EXPECT_EQ(gpud_events_table("accelerator-nvidia-error-xid", "v0_5_0"),
            "components_accelerator_nvidia_error_xid_events_v0_5_0");
  EXPECT_EQ(gpud_events_table("os", "v0_4_0"), "components_os_events_v0_4_0");
  EXPECT_EQ(gpud_events_table("My Plugin--x", "v0_5_0"), "components_my_plugin_x_events_v0_5_0");
}

TEST(GpudStateImport, EventsRebootsAndMachineIdArriveInGpudsStore) {
  TempDir dir;
  const std::string path = dir.file("gpud.state");
  {
    GpudStateFile f(path);
    f.event("os", kNow - 3600, "reboot", "Warning",
            "system reboot detected 2025-10-09 07:33:20 +0000 UTC");
    f.event("os", kNow - 60, "kernel_panic", "Fatal", "panic found in pstore");
    f.event("accelerator-nvidia-error-xid", kNow - 120, "error_xid", "Critical", "",
            R"({"data":"{\"time\":\"2025-10-09T08:31:00Z\",\"data_source\":\"kmsg\",)"
            R"(\"device_uuid\":\"PCI:0000:9b:00\",\"xid\":79}","device_uuid":"PCI:0000:9b:00"})");
    f.event("accelerator-nvidia-error-sxid", kNow - 130, "error_sxid", "", "",
            R"({"data":"12028","device_uuid":"PCI:0000:05:00"})");
    f.event("accelerator-nvidia-bad-envs", kNow - 10, "bad_env", "Warning", "x");
    f.metadata("machine_id", "gpud-machine-7");
    f.metadata("token", "secret-token");
  }
  GpudStore s;
  auto r = import_gpud_state(path, s.events, s.metadata, options());
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->events_stored(), 4u);
  EXPECT_EQ(r->reboots_stored, 1u);

  auto os = s.all("os");
  ASSERT_EQ(os.size(), 2u);
  EXPECT_EQ(os[1].name, "reboot");
  EXPECT_EQ(os[1].time, from_unix_seconds(kNow - 3600));
  EXPECT_EQ(os[1].type, EventType::kWarning);
  EXPECT_EQ(os[1].message, "system reboot detected 2025-10-09 07:33:20 +0000 UTC");
  EXPECT_EQ(os[1].extra_info.value("imported_from", ""), "GPUd");
  EXPECT_EQ(os[0].type, EventType::kFatal);

  auto xid = s.all("accelerator-nvidia-error-xid");
  ASSERT_EQ(xid.size(), 1u);
  EXPECT_EQ(xid[0].type, EventType::kCritical);
  EXPECT_EQ(xid[0].extra_info.value("xid", 0), 79);
  EXPECT_EQ(xid[0].extra_info.value("pci_bus_id", ""), "0000:9b:00.0");
  EXPECT_EQ(xid[0].message, "XID 79 on 0000:9b:00.0 (imported from GPUd)");

  auto sxid = s.all("accelerator-nvidia-error-sxid");
  ASSERT_EQ(sxid.size(), 1u);
  EXPECT_EQ(sxid[0].type, EventType::kUnknown);  // GPUd stored no type
  EXPECT_EQ(sxid[0].extra_info.value("sxid", 0), 12028);
  EXPECT_EQ(sxid[0].extra_info.value("pci_bus_id", ""), "0000:05:00.0");

  EXPECT_THAT(r->tables_without_component,
              ElementsAre("components_accelerator_nvidia_bad_envs_events_v0_5_0"));
  EXPECT_EQ(s.metadata.get(kKeyMachineId).value(), std::optional<std::string>("gpud-machine-7"));
  // GPUd's control-plane secrets are not gpud's to keep.
  EXPECT_EQ(s.metadata.get("token").value(), std::nullopt);
}

TEST(GpudStateImport, ImportingTwiceStoresNothingNew) {
  TempDir dir;
  const std::string path = dir.file("gpud.state");
  {
    GpudStateFile f(path);
    f.event("os", kNow - 3600, "reboot", "Warning", "system reboot detected");
    f.event("memory", kNow - 50, "memory_oom", "Warning", "oom", R"({"pid":"42"})");
    f.metadata("machine_id", "m-1");
  }
  GpudStore s;
  auto first = import_gpud_state(path, s.events, s.metadata, options());
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first->events_stored(), 2u);
  auto second = import_gpud_state(path, s.events, s.metadata, options());
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->events_stored(), 0u);
  EXPECT_EQ(second->read_by_component.at("os"), 1u);
  EXPECT_FALSE(second->previous_machine_id.has_value());
  EXPECT_EQ(s.all("os").size(), 1u);
  EXPECT_EQ(s.all("memory").size(), 1u);
}

TEST(GpudStateImport, GpudsMachineIdReplacesOneGpudDerivedAndSaysSo) {
  TempDir dir;
  const std::string path = dir.file("gpud.state");
  {
    GpudStateFile f(path);
    f.metadata("machine_id", "from-gpud");
  }
  GpudStore s;
  ASSERT_TRUE(s.metadata.set(kKeyMachineId, "from-etc-machine-id").ok());
  auto r = import_gpud_state(path, s.events, s.metadata, options());
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->previous_machine_id, std::optional<std::string>("from-etc-machine-id"));
  EXPECT_EQ(s.metadata.get(kKeyMachineId).value(), std::optional<std::string>("from-gpud"));
}

TEST(GpudStateImport, EventsOlderThanRetentionOrFarInTheFutureAreSkipped) {
  TempDir dir;
  const std::string path = dir.file("gpud.state");
  {
    GpudStateFile f(path);
    f.event("os", kNow - 15 * 86400, "reboot", "Warning", "too old");
    f.event("os", kNow - 13 * 86400, "reboot", "Warning", "kept");
    f.event("os", kNow + 3 * 86400, "reboot", "Warning", "future");
    f.exec(
        "INSERT INTO components_os_events_v0_5_0 VALUES ('yesterday', 'reboot', 'Warning', "
        "NULL, NULL)");
  }
  GpudStore s;
  auto r = import_gpud_state(path, s.events, s.metadata, options());
  ASSERT_TRUE(r.ok()) << r.error().message;
  auto os = s.all("os");
  ASSERT_EQ(os.size(), 1u);
  EXPECT_EQ(os[0].message, "kept");
  EXPECT_EQ(r->skipped_older, 1u);
  EXPECT_EQ(r->skipped_future, 1u);
  EXPECT_EQ(r->skipped_malformed, 1u);
}

TEST(GpudStateImport, HostileSizesAreCutOrSkipped) {
  TempDir dir;
  const std::string path = dir.file("gpud.state");
  {
    GpudStateFile f(path);
    f.event("memory", kNow - 1, "long_message", "Info", std::string(100'000, 'm'));
    f.event("memory", kNow - 2, "big_extra", "Info", "x",
            R"({"k":")" + std::string(200'000, 'e') + R"("})");
    f.event("memory", kNow - 3, "huge_extra", "Info", "x",
            R"({"k":")" + std::string(2 * 1024 * 1024, 'h') + R"("})");
    f.event("memory", kNow - 4, std::string(1000, 'n'), "Info", "long name");
    f.event("memory", kNow - 5, "not_json", "Info", "x", "not json");
    f.event("memory", kNow - 6, "ok", "Info", "x");
  }
  GpudStore s;
  auto r = import_gpud_state(path, s.events, s.metadata, options());
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->skipped_too_big, 1u);
  EXPECT_EQ(r->skipped_malformed, 1u);
  EXPECT_EQ(r->messages_truncated, 1u);
  EXPECT_EQ(r->extra_info_dropped, 2u);
  auto mem = s.all("memory");
  ASSERT_EQ(mem.size(), 4u);
  for (const Event& e : mem) {
    EXPECT_LE(e.message.size(), kGpudImportMaxMessageBytes) << e.name;
    EXPECT_LE(e.extra_info.dump().size(), kGpudImportMaxExtraInfoBytes) << e.name;
  }
  EXPECT_EQ(mem[0].name, "long_message");
  EXPECT_EQ(mem[0].message, std::string(kGpudImportMaxMessageBytes, 'm'));
}

TEST(GpudStateImport, EachComponentIsCappedToItsNewestEvents) {
  TempDir dir;
  const std::string path = dir.file("gpud.state");
  {
    GpudStateFile f(path);
    for (int i = 0; i < 10; ++i)
      f.event("memory", kNow - 100 + i, "e" + std::to_string(i), "Info", "");
  }
  GpudStore s;
  GpudImportOptions o = options();
  o.max_events_per_component = 4;
  auto r = import_gpud_state(path, s.events, s.metadata, o);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->skipped_beyond_cap, 6u);
  auto mem = s.all("memory");
  ASSERT_EQ(mem.size(), 4u);
  EXPECT_EQ(mem.front().name, "e9");
  EXPECT_EQ(mem.back().name, "e6");
}

TEST(GpudStateImport, SchemaBeforeV05AndItsMachineMetadataAreRead) {
  TempDir dir;
  const std::string path = dir.file("gpud.state");
  {
    GpudStateFile f(path);
    f.event("os", kNow - 7200, "reboot", "Warning", "old schema reboot", "", "v0_4_0");
    f.exec(
        "CREATE TABLE machine_metadata (machine_id TEXT, unix_seconds INTEGER, token TEXT, "
        "components TEXT)");
    f.exec("INSERT INTO machine_metadata VALUES ('old-machine', 1, 'tok', '')");
  }
  GpudStore s;
  auto r = import_gpud_state(path, s.events, s.metadata, options());
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->reboots_stored, 1u);
  EXPECT_EQ(s.metadata.get(kKeyMachineId).value(), std::optional<std::string>("old-machine"));
}

// GPUd stopped cleanly (its WAL checkpointed and removed): the import leaves no file beside it.
TEST(GpudStateImport, CleanlyClosedFileGetsNoSideFiles) {
  TempDir dir;
  const std::string path = dir.file("gpud state #1?.db");  // characters a URI would take apart
  {
    GpudStateFile f(path);
    f.event("os", kNow - 3600, "reboot", "Warning", "clean");
  }
  ASSERT_FALSE(fs::exists(path + "-wal"));
  const std::string before = read_bytes(path);
  GpudStore s;
  auto r = import_gpud_state(path, s.events, s.metadata, options());
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->reboots_stored, 1u);
  EXPECT_EQ(read_bytes(path), before);
  EXPECT_FALSE(fs::exists(path + "-wal"));
  EXPECT_FALSE(fs::exists(path + "-shm"));
}

// GPUd killed after recording a reboot: the row is only in the -wal file.
void write_reboot_left_in_wal(const std::string& path) {
  GpudStateFile f(path);
  f.event("os", kNow - 3600, "reboot", "Warning", "only in the wal");
  f.close_leaving_wal();
}

TEST(GpudStateImport, RowsLeftInTheWalAreReadAndTheFileStaysUnchanged) {
  TempDir dir;
  const std::string path = dir.file("gpud.state");
  write_reboot_left_in_wal(path);
  ASSERT_GT(fs::file_size(path + "-wal"), 0u);
  const std::string main_before = read_bytes(path);
  const std::string wal_before = read_bytes(path + "-wal");

  GpudStore s;
  auto r = import_gpud_state(path, s.events, s.metadata, options());
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->reboots_stored, 1u);
  EXPECT_EQ(read_bytes(path), main_before);
  EXPECT_EQ(read_bytes(path + "-wal"), wal_before);
}

TEST(GpudStateImport, NonSqliteFileIsAnErrorAndImportsNothing) {
  TempDir dir;
  const std::string path = dir.file("gpud.state");
  std::ofstream(path) << "this is not a database, it is a text file\n" << std::string(5000, 'x');
  GpudStore s;
  auto r = import_gpud_state(path, s.events, s.metadata, options());
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.error().message, HasSubstr("not a readable SQLite database"));
  EXPECT_FALSE(inspect_state_file(path).ok());
  EXPECT_TRUE(s.all("").empty());
}

// The schema on page 1 reads, the tables behind it do not: the import names them, never crashes.
TEST(GpudStateImport, DamagedTablePagesAreNamedInTheReport) {
  TempDir dir;
  const std::string path = dir.file("gpud.state");
  {
    GpudStateFile f(path, /*wal=*/false);
    f.exec("BEGIN");
    f.event("os", kNow - 10, "reboot", "Warning", "r");
    for (int i = 0; i < 400; ++i)
      f.event("memory", kNow - 20 - i, "memory_oom", "Warning", std::string(200, 'a' + i % 26));
    f.exec("COMMIT");
  }
  // Page 1 (the schema) stays; the pages after it (the tables and indexes) are overwritten.
  {
    std::fstream io(path, std::ios::in | std::ios::out | std::ios::binary);
    io.seekp(4096);
    const std::string junk(fs::file_size(path) - 4096, '\x5a');
    io.write(junk.data(), static_cast<std::streamsize>(junk.size()));
  }
  GpudStore s;
  auto r = import_gpud_state(path, s.events, s.metadata, options());
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_FALSE(r->table_errors.empty());
  EXPECT_THAT(r->table_errors.front(), HasSubstr("components_"));
}

TEST(GpudStateImport, DatabaseWithoutGpudsTablesIsRefused) {
  TempDir dir;
  const std::string path = dir.file("other.db");
  {
    GpudStateFile f(path);
    f.exec("CREATE TABLE photos (id INTEGER, name TEXT)");
  }
  GpudStore s;
  auto r = import_gpud_state(path, s.events, s.metadata, options());
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.error().message, HasSubstr("none of GPUd's tables"));
  EXPECT_EQ(inspect_state_file(path).value(), StateFileKind::kOther);
}

TEST(GpudStateImport, GpudsOwnStoreIsToldApartFromGpuds) {
  TempDir dir;
  const std::string own = dir.file("gpud.state");
  { ASSERT_TRUE(Database::open(own).ok()); }
  EXPECT_EQ(inspect_state_file(own).value(), StateFileKind::kGpud);
  GpudStore s;
  auto r = import_gpud_state(own, s.events, s.metadata, options());
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.error().message, HasSubstr("gpud's own store"));

  const std::string theirs = dir.file("theirs.state");
  {
    GpudStateFile f(theirs);
    f.metadata("machine_id", "m");
  }
  EXPECT_EQ(inspect_state_file(theirs).value(), StateFileKind::kGpudGo);
  EXPECT_EQ(inspect_state_file(dir.file("missing")).value(), StateFileKind::kAbsent);
}

TEST(GpudStateImport, MovingAsideTakesTheWalAlongAndRefusesToOverwrite) {
  TempDir dir;
  const std::string path = dir.file("gpud.state");
  write_reboot_left_in_wal(path);
  auto moved = move_gpud_state_aside(path);
  ASSERT_TRUE(moved.ok()) << moved.error().message;
  EXPECT_EQ(*moved, path + ".GPUd");
  EXPECT_FALSE(fs::exists(path));
  EXPECT_FALSE(fs::exists(path + "-wal"));
  EXPECT_TRUE(fs::exists(path + ".GPUd-wal"));
  GpudStore s;
  auto r = import_gpud_state(*moved, s.events, s.metadata, options());
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->reboots_stored, 1u);

  std::ofstream(path) << "x";
  auto again = move_gpud_state_aside(path);
  ASSERT_FALSE(again.ok());
  EXPECT_THAT(again.error().message, HasSubstr("exists already"));
  EXPECT_TRUE(fs::exists(path));
}

}  // namespace
}  // namespace gpud::store
