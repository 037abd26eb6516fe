#include "app/gpud_state_migration.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/time_util.h"
#include "store/database.h"
#include "store/event_store.h"
#include "store/metadata.h"
#include "testing/gpud_state_file.h"
#include "testing/temp_dir.h"

namespace gpud::app {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

int64_t now_s() { return to_unix_seconds(Clock::now()); }

// GPUd's state file where GPUd left it: <data-dir>/gpud.state.
void write_gpud_state(const std::string& data_dir) {
  gpud::testing::GpudStateFile f(data_dir + "/gpud.state");
  f.event("os", now_s() - 3600, "reboot", "Warning", "system reboot detected");
  f.metadata("machine_id", "gpud-node-1");
}

// What write_gpud_state wrote, as gpud's store holds it after the import.
void expect_imported(const store::EventStore& events, const store::Metadata& meta) {
  auto os = events.query("os", TimePoint::min(), TimePoint::max());
  ASSERT_TRUE(os.ok());
  ASSERT_EQ(os->size(), 1u);
  EXPECT_EQ(os->front().name, "reboot");
  EXPECT_EQ(os->front().message, "system reboot detected");
  EXPECT_EQ(meta.get(store::kKeyMachineId).value(), std::optional<std::string>("gpud-node-1"));
}

TEST(GpudStateMigration, GpudsFileIsMovedAsideImportedOnceAndFoundAgainLater) {
  gpud::testing_support::TempDir dir;
  write_gpud_state(dir.path());
  auto found = find_gpud_state(dir.path(), /*store_on_disk=*/true);
  ASSERT_TRUE(found.ok()) << found.error().message;
  ASSERT_TRUE(found->has_value());
  EXPECT_EQ(**found, dir.file("gpud.state.GPUd"));
  EXPECT_FALSE(fs::exists(dir.file("gpud.state")));

  auto db = store::Database::open(dir.file("gpud.state"));
  ASSERT_TRUE(db.ok()) << db.error().message;
  store::EventStore events(**db);
  store::Metadata meta(**db);
  import_gpud_state_once(**found, events, meta, std::chrono::hours(24 * 14));
  expect_imported(events, meta);
  auto record = meta.get(store::kKeyGpudStateImport);
  ASSERT_TRUE(record.ok() && record->has_value());
  EXPECT_EQ(nlohmann::json::parse(**record).value("events_stored", 0), 1);

  // A later start: gpud.state is gpud's own now, the moved file is found, and not imported again.
  ASSERT_TRUE(events.purge("os", TimePoint::max()).ok());
  auto again = find_gpud_state(dir.path(), true);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, std::optional<std::string>(dir.file("gpud.state.GPUd")));
  import_gpud_state_once(**again, events, meta, std::chrono::hours(24 * 14));
  EXPECT_TRUE(events.query("os", TimePoint::min(), TimePoint::max())->empty());
}

TEST(GpudStateMigration, InMemoryStoreReadsGpudsFileWhereItIs) {
  gpud::testing_support::TempDir dir;
  write_gpud_state(dir.path());
  auto found = find_gpud_state(dir.path(), /*store_on_disk=*/false);
  ASSERT_TRUE(found.ok());
  EXPECT_EQ(*found, std::optional<std::string>(dir.file("gpud.state")));
  EXPECT_FALSE(fs::exists(dir.file("gpud.state.GPUd")));
}

// `gpud metadata` before the first `gpud run` opens GPUd's file as gpud's store, adding gpud's
// tables to it: GPUd's tables in it are still imported, in place.
TEST(GpudStateMigration, GpudsTablesInsideGpudsStoreAreImportedInPlace) {
  gpud::testing_support::TempDir dir;
  write_gpud_state(dir.path());
  auto db = store::Database::open(dir.file("gpud.state"));
  ASSERT_TRUE(db.ok()) << db.error().message;
  EXPECT_EQ(store::inspect_state_file(dir.file("gpud.state")).value(),
            store::StateFileKind::kGpudInGpudGo);
  auto found = find_gpud_state(dir.path(), true);
  ASSERT_TRUE(found.ok());
  EXPECT_EQ(*found, std::optional<std::string>(dir.file("gpud.state")));
  store::EventStore events(**db);
  store::Metadata meta(**db);
  import_gpud_state_once(**found, events, meta, std::chrono::hours(24 * 14));
  expect_imported(events, meta);
}

TEST(GpudStateMigration, NoGpudFileMeansNothingToImport) {
  gpud::testing_support::TempDir dir;
  auto none = find_gpud_state(dir.path(), true);
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
  // gpud's own store in place is not GPUd's.
  { ASSERT_TRUE(store::Database::open(dir.file("gpud.state")).ok()); }
  auto own = find_gpud_state(dir.path(), true);
  ASSERT_TRUE(own.ok());
  EXPECT_FALSE(own->has_value());
  EXPECT_TRUE(fs::exists(dir.file("gpud.state")));
}

TEST(GpudStateMigration, UnreadableGpudFileIsRecordedAsAFailureAndTheStartGoesOn) {
  gpud::testing_support::TempDir dir;
  std::ofstream(dir.file("gpud.state.GPUd")) << std::string(8192, 'z');
  auto found = find_gpud_state(dir.path(), true);
  ASSERT_TRUE(found.ok());
  ASSERT_TRUE(found->has_value());
  auto db = store::Database::open_in_memory();
  ASSERT_TRUE(db.ok());
  store::EventStore events(**db);
  store::Metadata meta(**db);
  import_gpud_state_once(**found, events, meta, std::chrono::hours(24));
  auto record = meta.get(store::kKeyGpudStateImport);
  ASSERT_TRUE(record.ok() && record->has_value());
  EXPECT_THAT(nlohmann::json::parse(**record).value("error", ""),
              HasSubstr("not a readable SQLite database"));
  EXPECT_TRUE(events.query("", TimePoint::min(), TimePoint::max())->empty());
}

}  // namespace
}  // namespace gpud::app
