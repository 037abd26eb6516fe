// Database: the one SQLite file (WAL mode) that holds events, metric history and metadata.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "core/health.h"
#include "core/metrics.h"
#include "core/result.h"

namespace gpud::store {

// 1: events, metrics, metadata. 2: events carry who acknowledged them (set-healthy) and when.
inline constexpr int kSchemaVersion = 2;
inline constexpr const char* kStateFileName = "gpud.state";
// gpud.state and its -wal/-shm side files hold every component's events (process names and pids
// of the node's jobs among them): only gpud's user reads them.
inline constexpr mode_t kStateFileMode = 0600;

// Store failures, by operation (insert, query, purge, acknowledge, metric_write, metric_query,
// metric_purge, metadata, maintenance, reopen).
inline constexpr std::string_view kStoreErrorsTotal = "gpud_store_errors_total";
// Database files moved aside as corrupt (at open and while running).
inline constexpr std::string_view kStoreQuarantinesTotal = "gpud_store_quarantines_total";

// A database file moved aside because SQLite reported it corrupt.
struct Quarantine {
  std::string path;  // where the damaged file now is
  TimePoint time;
  std::string reason;  // SQLite's message
};

// What the store can tell about its own health (read by the `gpud` component).
struct DatabaseHealth {
  bool writable = true;    // false while the latest write failed
  bool usable = true;      // false: corrupt, and no fresh database could replace it yet
  std::string last_error;  // the latest failure, kept after a later success
  std::map<std::string, uint64_t> errors_by_op;
  std::vector<Quarantine> quarantines;  // by this process, oldest first
};

class Database {
 public:
  // Opens (creating when missing, mode 0600) <path> in WAL mode, creates the schema,
  // records/checks the schema version. A file SQLite reports as corrupt (or not a database) is
  // renamed to <path>.corrupt-<unix time>, one clear line is logged, and a fresh file is opened.
  // A schema version newer than ours is an error. An existing file (and its -wal/-shm) is set to
  // 0600.
  static Result<std::unique_ptr<Database>> open(const std::string& path);
  // A private in-memory database (for --db-in-memory and for scan).
  static Result<std::unique_ptr<Database>> open_in_memory();
  ~Database();
  Database(const Database&) = delete;
  Database& operator=(const Database&) = delete;

  // The current connection; it changes when a corrupt database is replaced, so callers read it
  // under mutex() for each statement sequence and never keep it.
  sqlite3* handle() const { return db_; }
  // One connection shared by all threads; callers take this lock around every statement sequence.
  std::mutex& mutex() const { return mu_; }
  const std::string& path() const { return path_; }  // empty in memory
  // Path of the file moved aside at open because it was corrupt; empty otherwise.
  const std::string& quarantined_path() const { return quarantined_; }

  // Where failures and quarantines are counted (gpud_store_errors_total{op},
  // gpud_store_quarantines_total, including a quarantine at open); optional, set before use.
  void set_metrics(MetricRegistry* metrics);
  MetricRegistry* metrics() const { return metrics_; }
  // Called after every failed operation (counted in errors_by_op), with mutex() held, so it must not
  // use the database: the daemon's loop is woken by it to retry what waits for the store. Empty: none.
  void set_on_failure(std::function<void()> on_failure);

  // These four take mutex() themselves: do not call them while holding it.
  Result<void> exec(const std::string& sql);
  Result<void> vacuum();
  Result<int64_t> size_bytes() const;  // page_count * page_size
  DatabaseHealth health() const;

  // For callers holding mutex().
  //
  // Drops the connection's cached pages before a write. SQLite trusts its page cache while no
  // other connection writes, so a file damaged behind its back reads fine from the cache, and the
  // write would commit into the damaged file; re-read, the damage fails this write instead.
  void begin_write_locked();
  void note_write_ok_locked();
  // Counts a failed operation and keeps its message; `rc` is the extended result code the
  // connection reported for it (read before any other call on the connection). When that code
  // says corrupt or not a database, the files are moved aside (as open() does) and a fresh
  // database replaces the connection; returns true when that happened, so the caller may retry on
  // the fresh database.
  bool note_failure_locked(std::string_view op, const Error& error, int rc, bool write);
  // Counts a failed operation in errors_by_op and gpud_store_errors_total{op}.
  void count_failure_locked(std::string_view op);
  // Replaces a connection that a failed reopen left on a corrupt file; true when it did.
  bool retry_reopen_locked();

  // Runs f(handle()) -> Result<T> as the operation `op` (a write when `write`), for callers
  // holding mutex(). A failure is counted, an open transaction it left is rolled back, and when
  // the database turned out corrupt and was replaced, f runs once more on the fresh database. f
  // must return right after the call that failed, so that the connection's result code is that
  // call's.
  template <typename F>
  auto run_locked(std::string_view op, bool write, F&& f) -> decltype(f(handle())) {
    for (int attempt = 0;; ++attempt) {
      if (!health_.usable) {
        count_failure_locked(op);
        return make_error("the state database is unusable: " + health_.last_error);
      }
      if (write) begin_write_locked();
      auto r = f(db_);
      if (r) {
        if (write) note_write_ok_locked();
        return r;
      }
      int rc = sqlite3_extended_errcode(db_);
      if (sqlite3_get_autocommit(db_) == 0)
        sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
      if (!note_failure_locked(op, r.error(), rc, write) || attempt > 0) return r;
    }
  }

  // The files a quarantine left next to `path` (<path>.corrupt-*, without their side files).
  static std::vector<std::string> quarantined_files(const std::string& path);

 private:
  Database() = default;
  bool reopen_locked(const std::string& reason);

  sqlite3* db_ = nullptr;
  std::string path_;
  std::string quarantined_;
  MetricRegistry* metrics_ = nullptr;
  std::function<void()> on_failure_;
  DatabaseHealth health_;
  // The damaged file was moved aside but no fresh one could be opened yet.
  bool reopen_pending_ = false;
  // SQLite's message about the damage, kept for the retries of a failed reopen.
  std::string corruption_;
  mutable std::mutex mu_;
};

}  // namespace gpud::store
