// Database: the one SQLite file (WAL mode) that holds events, metric history and metadata.
#pragma once

#include <sqlite3.h>

#include <memory>
#include <mutex>
#include <string>

#include "core/result.h"

namespace gpud::store {

inline constexpr int kSchemaVersion = 1;
inline constexpr const char* kStateFileName = "gpud.state";

class Database {
 public:
  // Opens (creating when missing) <path> in WAL mode, creates the schema, records/checks the schema
  // version. A file SQLite reports as corrupt (or not a database) is renamed to
  // <path>.corrupt-<unix time>, one clear line is logged, and a fresh file is opened. A schema
  // version newer than ours is an error.
  static Result<std::unique_ptr<Database>> open(const std::string& path);
  // A private in-memory database (for --db-in-memory and for scan).
  static Result<std::unique_ptr<Database>> open_in_memory();
  ~Database();
  Database(const Database&) = delete;
  Database& operator=(const Database&) = delete;

  sqlite3* handle() const { return db_; }
  // One connection shared by all threads; callers take this lock around every statement sequence.
  std::mutex& mutex() const { return mu_; }
  const std::string& path() const { return path_; }  // empty in memory
  // Path of the file moved aside at open because it was corrupt; empty otherwise.
  const std::string& quarantined_path() const { return quarantined_; }

  // These three take mutex() themselves: do not call them while holding it.
  Result<void> exec(const std::string& sql);
  Result<void> vacuum();
  Result<int64_t> size_bytes() const;  // page_count * page_size

 private:
  Database() = default;
  sqlite3* db_ = nullptr;
  std::string path_;
  std::string quarantined_;
  mutable std::mutex mu_;
};

}  // namespace gpud::store
