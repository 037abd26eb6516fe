#include "store/database.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <optional>
#include <string_view>
#include <system_error>
#include <utility>

#include "core/log.h"
#include "core/time_util.h"
#include "store/metadata.h"
#include "store/statement.h"

namespace gpud::store {
namespace {

// The outcome of one step of opening: SQLITE_OK, or the sqlite result code that failed and why.
struct OpenStatus {
  int rc = SQLITE_OK;
  std::string message;
  bool ok() const { return rc == SQLITE_OK; }
};

bool is_corruption(int rc) {
  int primary = rc & 0xff;
  return primary == SQLITE_CORRUPT || primary == SQLITE_NOTADB;
}

OpenStatus exec_status(sqlite3* db, const char* sql) {
  char* err = nullptr;
  int rc = sqlite3_exec(db, sql, nullptr, nullptr, &err);
  if (rc == SQLITE_OK) return {};
  OpenStatus s{rc, err != nullptr ? err : sqlite3_errstr(rc)};
  sqlite3_free(err);
  return s;
}

OpenStatus prepare_status(sqlite3* db, std::optional<Statement>& out, std::string_view sql) {
  auto st = Statement::prepare(db, sql);
  if (!st) return {sqlite3_extended_errcode(db), st.error().message};
  out.emplace(std::move(st).value());
  return {};
}

// Rows of PRAGMA quick_check other than a single "ok" mean the file is damaged.
OpenStatus quick_check(sqlite3* db) {
  std::optional<Statement> st;
  if (auto s = prepare_status(db, st, "PRAGMA quick_check"); !s.ok()) return s;
  std::string problems;
  for (;;) {
    int rc = st->step();
    if (rc == SQLITE_DONE) break;
    if (rc != SQLITE_ROW) return {rc, sqlite3_errmsg(db)};
    std::string row = st->text(0);
    if (row != "ok") problems += (problems.empty() ? "" : "; ") + row;
  }
  if (!problems.empty()) return {SQLITE_CORRUPT, "quick_check: " + problems};
  return {};
}

constexpr const char* kCreateMetadata =
    "CREATE TABLE IF NOT EXISTS gpud_metadata ("
    "key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID";

constexpr const char* kCreateSchema =
    "CREATE TABLE IF NOT EXISTS gpud_events ("
    "id INTEGER PRIMARY KEY, component TEXT NOT NULL, unix_seconds INTEGER NOT NULL, "
    "name TEXT NOT NULL, type TEXT NOT NULL, message TEXT NOT NULL DEFAULT '', "
    "extra_info TEXT NOT NULL DEFAULT '{}', acknowledged_unix_seconds INTEGER, "
    "acknowledged_by TEXT);"
    "CREATE INDEX IF NOT EXISTS gpud_events_component_time "
    "ON gpud_events(component, unix_seconds);"
    "CREATE UNIQUE INDEX IF NOT EXISTS gpud_events_dedup "
    "ON gpud_events(component, unix_seconds, name, type, message, extra_info);"
    "CREATE TABLE IF NOT EXISTS gpud_metrics ("
    "unix_milliseconds INTEGER NOT NULL, component TEXT NOT NULL, name TEXT NOT NULL, "
    "labels TEXT NOT NULL DEFAULT '', value REAL NOT NULL, "
    "PRIMARY KEY (unix_milliseconds, component, name, labels)) WITHOUT ROWID;"
    "CREATE INDEX IF NOT EXISTS gpud_metrics_component_time "
    "ON gpud_metrics(component, unix_milliseconds);";

// Version 1's events table had no acknowledgement: the columns are added (NULL: not acknowledged).
constexpr const char* kMigrateEventsToVersion2 =
    "ALTER TABLE gpud_events ADD COLUMN acknowledged_unix_seconds INTEGER;"
    "ALTER TABLE gpud_events ADD COLUMN acknowledged_by TEXT;";

// Creates the tables and records our schema version; refuses a database written by a newer gpud.
// An unsupported version is reported with rc SQLITE_ERROR so it is never mistaken for corruption.
OpenStatus ensure_schema(sqlite3* db) {
  if (auto s = exec_status(db, kCreateMetadata); !s.ok()) return s;

  std::optional<Statement> get;
  if (auto s = prepare_status(db, get, "SELECT value FROM gpud_metadata WHERE key = ?1"); !s.ok()) {
    return s;
  }
  get->bind(1, std::string_view(kKeySchemaVersion));
  int rc = get->step();
  int stored_version = 0;  // none recorded: a new database
  if (rc == SQLITE_ROW) {
    std::string text = get->text(0);
    int version = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), version);
    if (ec != std::errc() || end != text.data() + text.size()) {
      return {SQLITE_ERROR, "unreadable database schema version \"" + text + "\""};
    }
    if (version > kSchemaVersion) {
      return {SQLITE_ERROR, "database schema version " + std::to_string(version) +
                                " is newer than this gpud supports (" +
                                std::to_string(kSchemaVersion) +
                                "); upgrade gpud or use another --data-dir"};
    }
    stored_version = version;
  } else if (rc != SQLITE_DONE) {
    return {rc, sqlite3_errmsg(db)};
  }
  get.reset();

  if (auto s = exec_status(db, "BEGIN IMMEDIATE"); !s.ok()) return s;
  // Upgrades run in the transaction that records the new version: a failed one leaves the old.
  OpenStatus s;
  if (stored_version == 1) s = exec_status(db, kMigrateEventsToVersion2);
  if (s.ok()) s = exec_status(db, kCreateSchema);
  if (s.ok()) {
    std::optional<Statement> put;
    s = prepare_status(db, put,
                       "INSERT INTO gpud_metadata(key, value) VALUES(?1, ?2) "
                       "ON CONFLICT(key) DO UPDATE SET value = excluded.value");
    if (s.ok()) {
      put->bind(1, std::string_view(kKeySchemaVersion));
      put->bind(2, std::to_string(kSchemaVersion));
      if (int prc = put->step(); prc != SQLITE_DONE) s = {prc, sqlite3_errmsg(db)};
    }
  }
  if (s.ok()) s = exec_status(db, "COMMIT");
  if (!s.ok()) (void)exec_status(db, "ROLLBACK");
  return s;
}

constexpr const char* kCacheSizePragma = "PRAGMA cache_size=-512";  // KiB

// Settings and schema on a freshly opened connection.
OpenStatus init_connection(sqlite3* db, bool in_memory) {
  sqlite3_extended_result_codes(db, 1);
  sqlite3_busy_timeout(db, 5000);
  if (!in_memory) {
    if (auto s = exec_status(db, "PRAGMA journal_mode=WAL"); !s.ok()) return s;
    // SQLite keeps up to 2 MiB of pages per connection by default: reached within days (the
    // start-up quick_check reads every page), it is the daemon's largest heap item. The kernel's
    // page cache still holds the file, so a page read again costs a pread, not a disk read.
    if (auto s = exec_status(db, kCacheSizePragma); !s.ok()) return s;
  }
  if (auto s = exec_status(db, "PRAGMA synchronous=NORMAL"); !s.ok()) return s;
  if (!in_memory) {
    if (auto s = quick_check(db); !s.ok()) return s;
  }
  return ensure_schema(db);
}

// Creates <path> empty (SQLite takes an empty file for an empty database) with kStateFileMode, or
// narrows an existing one and its side files to it: SQLite gives the -wal and -shm files it
// creates the main file's mode, so this one mode covers all three. Failures are left to SQLite's
// open, which names the path in its error.
void prepare_state_file(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, kStateFileMode);
  if (fd < 0) return;
  struct stat st {};
  if (::fstat(fd, &st) == 0 && (st.st_mode & 07777) != kStateFileMode) ::fchmod(fd, kStateFileMode);
  ::close(fd);
  for (const char* side : {"-wal", "-shm"}) {
    std::string p = path + side;
    if (::stat(p.c_str(), &st) == 0 && (st.st_mode & 07777) != kStateFileMode)
      ::chmod(p.c_str(), kStateFileMode);
  }
}

// Opens and initialises one connection; on failure the handle is closed and *out left null.
OpenStatus open_connection(const std::string& path, bool in_memory, sqlite3** out) {
  *out = nullptr;
  sqlite3* db = nullptr;
  int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX;
  int rc = sqlite3_open_v2(path.c_str(), &db, flags, nullptr);
  if (rc != SQLITE_OK) {
    OpenStatus s{rc, db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc)};
    sqlite3_close_v2(db);
    return s;
  }
  OpenStatus s = init_connection(db, in_memory);
  if (!s.ok()) {
    // Closing the last connection checkpoints the WAL into the main file and deletes it; for a
    // damaged file we keep both untouched so they can be moved aside whole.
    if (is_corruption(s.rc)) sqlite3_db_config(db, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, nullptr);
    sqlite3_close_v2(db);
    return s;
  }
  *out = db;
  return {};
}

// Moves <path> and its -wal/-shm side files aside; returns the new name of the main file.
// A path that no longer exists (removed by hand) has nothing to move: the result is then empty.
Result<std::string> quarantine(const std::string& path) {
  namespace fs = std::filesystem;
  std::string suffix = ".corrupt-" + std::to_string(to_unix_seconds(Clock::now()));
  // Two quarantines within one second must not overwrite the first.
  std::string unique = suffix;
  std::error_code ec;
  for (int n = 1; fs::exists(path + unique, ec); ++n) unique = suffix + "-" + std::to_string(n);

  std::string target = path + unique;
  if (!fs::exists(path, ec) && !ec) return std::string();
  fs::rename(path, target, ec);
  if (ec) return make_error("move corrupt database " + path + " aside: " + ec.message());
  for (const char* side : {"-wal", "-shm", "-journal"}) {
    std::string from = path + side;
    if (!fs::exists(from, ec)) continue;
    fs::rename(from, from + unique, ec);
    // A side file left behind would be applied to the fresh database; better to drop it.
    if (ec) fs::remove(from, ec);
  }
  return target;
}

}  // namespace

Result<std::unique_ptr<Database>> Database::open(const std::string& path) {
  sqlite3* db = nullptr;
  prepare_state_file(path);
  OpenStatus s = open_connection(path, false, &db);
  std::string quarantined;
  std::string corruption;
  if (!s.ok() && is_corruption(s.rc)) {
    auto moved = quarantine(path);
    if (!moved) return make_error(moved.error().message + " (" + s.message + ")");
    quarantined = *moved;
    corruption = s.message;
    logger("store")->error(
        "database {} is corrupt ({}); moved it to {} and started a fresh database", path, s.message,
        quarantined);
    prepare_state_file(path);
    s = open_connection(path, false, &db);
  }
  if (!s.ok()) return make_error("open database " + path + ": " + s.message);

  std::unique_ptr<Database> out(
      new Database());  // private constructor: make_unique cannot reach it
  out->db_ = db;
  out->path_ = path;
  if (!quarantined.empty())
    out->health_.quarantines.push_back({quarantined, Clock::now(), std::move(corruption)});
  out->quarantined_ = std::move(quarantined);
  return out;
}

Result<std::unique_ptr<Database>> Database::open_in_memory() {
  sqlite3* db = nullptr;
  OpenStatus s = open_connection(":memory:", true, &db);
  if (!s.ok()) return make_error("open in-memory database: " + s.message);
  std::unique_ptr<Database> out(new Database());
  out->db_ = db;
  return out;
}

Database::~Database() {
  // close_v2 defers the close until any statement a caller leaked is finalized, instead of failing.
  if (db_ != nullptr) sqlite3_close_v2(db_);
}

void Database::set_metrics(MetricRegistry* metrics) {
  std::lock_guard lock(mu_);
  metrics_ = metrics;
  if (metrics_ == nullptr) return;
  metrics_->describe(kStoreErrorsTotal, "Failed operations of the state database, by operation",
                     MetricKind::kCounter);
  metrics_->describe(kStoreQuarantinesTotal,
                     "State databases moved aside as corrupt (at start and while running)",
                     MetricKind::kCounter);
  // Present from the start, so that an alert can use rate() from the first scrape on.
  metrics_->add("", kStoreQuarantinesTotal, static_cast<double>(health_.quarantines.size()));
}

DatabaseHealth Database::health() const {
  std::lock_guard lock(mu_);
  return health_;
}

void Database::begin_write_locked() {
  if (db_ != nullptr && !path_.empty()) sqlite3_db_release_memory(db_);
}

void Database::note_write_ok_locked() {
  if (!health_.writable) logger("store")->info("database {} takes writes again", path_);
  health_.writable = true;
}

void Database::set_on_failure(std::function<void()> on_failure) {
  std::lock_guard lock(mu_);
  on_failure_ = std::move(on_failure);
}

void Database::count_failure_locked(std::string_view op) {
  ++health_.errors_by_op[std::string(op)];
  if (metrics_ != nullptr) metrics_->add("", kStoreErrorsTotal, 1, {{"op", std::string(op)}});
  if (on_failure_) on_failure_();
}

bool Database::note_failure_locked(std::string_view op, const Error& error, int rc, bool write) {
  count_failure_locked(op);
  health_.last_error = std::string(op) + ": " + error.message;
  // One line when writes start failing, not one per failed write (a full disk fails them all).
  if (write && health_.writable)
    logger("store")->error("database {} cannot write ({}); events wait in memory until it can",
                           path_.empty() ? ":memory:" : path_, health_.last_error);
  if (write) health_.writable = false;
  if (!is_corruption(rc) || path_.empty()) return false;
  return reopen_locked(error.message);
}

bool Database::retry_reopen_locked() {
  if (health_.usable) return false;
  return reopen_locked(corruption_);
}

// The damaged file is renamed while the old connection still has it open (on Linux the
// connection simply follows the inode), so that when no fresh database can be created the old
// connection is kept and every operation keeps failing, counted, instead of running on no
// connection at all.
bool Database::reopen_locked(const std::string& reason) {
  if (health_.usable) corruption_ = reason;
  auto fail = [this](const std::string& why) {
    // Retried every few seconds: one line when the store becomes unusable, not one per retry.
    if (health_.usable) logger("store")->error("{}", why);
    health_.usable = false;
    health_.writable = false;
    health_.last_error = why;
    count_failure_locked("reopen");
    return false;
  };
  if (!reopen_pending_) {
    auto moved = quarantine(path_);
    if (!moved)
      return fail("database " + path_ + " is corrupt (" + reason +
                  ") and cannot be moved aside: " + moved.error().message);
    if (!moved->empty()) {
      health_.quarantines.push_back({*moved, Clock::now(), reason});
      if (metrics_ != nullptr) metrics_->add("", kStoreQuarantinesTotal, 1);
      logger("store")->error("database {} turned corrupt while running ({}); moved it to {}", path_,
                             reason, *moved);
    }
    reopen_pending_ = true;
  }
  prepare_state_file(path_);
  sqlite3* fresh = nullptr;
  OpenStatus s = open_connection(path_, false, &fresh);
  if (!s.ok()) return fail("open a fresh database " + path_ + ": " + s.message);
  // The old connection must not checkpoint its WAL into the file it is closing: that file is
  // the quarantined one now, and is kept as it was found.
  sqlite3_db_config(db_, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, nullptr);
  sqlite3_close_v2(db_);
  db_ = fresh;
  reopen_pending_ = false;
  health_.usable = true;
  health_.writable = true;
  logger("store")->warn("opened a fresh database {}", path_);
  return true;
}

std::vector<std::string> Database::quarantined_files(const std::string& path) {
  namespace fs = std::filesystem;
  std::vector<std::string> out;
  if (path.empty()) return out;
  const fs::path p(path);
  const std::string prefix = p.filename().string() + ".corrupt-";
  std::error_code ec;
  fs::directory_iterator it(p.has_parent_path() ? p.parent_path() : fs::path("."), ec);
  for (; !ec && it != fs::directory_iterator(); it.increment(ec)) {
    std::string name = it->path().filename().string();
    if (name.compare(0, prefix.size(), prefix) == 0) out.push_back(it->path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

Result<void> Database::exec(const std::string& sql) {
  std::lock_guard lock(mu_);
  OpenStatus s = exec_status(db_, sql.c_str());
  if (!s.ok()) {
    Error e = make_error("exec \"" + sql + "\": " + s.message);
    note_failure_locked("maintenance", e, s.rc, false);
    return e;
  }
  return {};
}

Result<void> Database::vacuum() { return exec("VACUUM"); }

Result<int64_t> Database::size_bytes() const {
  std::lock_guard lock(mu_);
  auto pragma = [this](const char* sql) -> Result<int64_t> {
    auto st = Statement::prepare(db_, sql);
    if (!st) return st.error();
    if (st->step() != SQLITE_ROW) return sqlite_error(db_, sql);
    return st->int64(0);
  };
  auto pages = pragma("PRAGMA page_count");
  if (!pages) return pages.error();
  auto page_size = pragma("PRAGMA page_size");
  if (!page_size) return page_size.error();
  return *pages * *page_size;
}

}  // namespace gpud::store
