// Test helper: a SQLite file shaped as GPUd (github.com/leptonai/gpud) writes its state, for the
// tests of gpud's import of it.
#pragma once

#include <gtest/gtest.h>
#include <sqlite3.h>

#include <cstdint>
#include <string>

#include "store/gpud_state_import.h"
#include "store/statement.h"

namespace gpud::testing {

// A database shaped as GPUd writes it. The statements give the tables GPUd creates, column for
// column: github.com/leptonai/gpud at commit 4a8de33a3f02e207f39e9023d67125592d599731,
// pkg/eventstore/database.go createTable (events, schema "v0_5_0", and the "v0_4_0" one before
// it with suggested_actions, commit 6a6da97e), pkg/metadata/metadata.go CreateTableMetadata, and
// the machine_metadata table of GPUd before v0.5 (pkg/metadata/deprecated.go before b5c2c3fb).
class GpudStateFile {
 public:
  explicit GpudStateFile(const std::string& path, bool wal = true) {
    EXPECT_EQ(sqlite3_open(path.c_str(), &db_), SQLITE_OK);
    if (wal) exec("PRAGMA journal_mode=WAL");
  }
  ~GpudStateFile() { close(); }
  void close() {
    if (db_ != nullptr) sqlite3_close(db_);
    db_ = nullptr;
  }
  // Closing without the checkpoint: the rows stay in the -wal file, as when GPUd was killed.
  void close_leaving_wal() {
    sqlite3_db_config(db_, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, nullptr);
    close();
  }
  void exec(const std::string& sql) {
    char* err = nullptr;
    EXPECT_EQ(sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err), SQLITE_OK)
        << sql << ": " << (err != nullptr ? err : "");
    sqlite3_free(err);
  }
  void events_table(const std::string& component, const std::string& schema = "v0_5_0") {
    const std::string t = store::gpud_events_table(component, schema);
    exec("CREATE TABLE IF NOT EXISTS " + t +
         " (\n\ttimestamp INTEGER NOT NULL,\n\tname TEXT NOT NULL,\n\ttype TEXT NOT NULL,\n\t"
         "message TEXT,\n\textra_info TEXT" +
         (schema == "v0_4_0" ? ",\n\tsuggested_actions TEXT" : "") + "\n);");
    for (const char* col : {"timestamp", "name", "type"})
      exec("CREATE INDEX IF NOT EXISTS idx_" + t + "_" + col + " ON " + t + "(" + col + ");");
  }
  // GPUd's insert: NULLIF(?, '') for message and extra_info.
  void event(const std::string& component, int64_t ts, const std::string& name,
             const std::string& type, const std::string& message,
             const std::string& extra_info = "", const std::string& schema = "v0_5_0") {
    events_table(component, schema);
    auto st = store::Statement::prepare(
        db_, "INSERT INTO " + store::gpud_events_table(component, schema) +
                 " (timestamp, name, type, message, extra_info) VALUES "
                 "(?, ?, ?, NULLIF(?, ''), NULLIF(?, ''))");
    ASSERT_TRUE(st.ok());
    st->bind(1, ts);
    st->bind(2, name);
    st->bind(3, type);
    st->bind(4, message);
    st->bind(5, extra_info);
    ASSERT_TRUE(st->run("insert").ok());
  }
  void metadata(const std::string& key, const std::string& value) {
    exec(
        "CREATE TABLE IF NOT EXISTS gpud_metadata (\n\tkey TEXT PRIMARY KEY,\n\tvalue TEXT\n) "
        "WITHOUT ROWID;");
    auto st =
        store::Statement::prepare(db_, "INSERT INTO gpud_metadata (key, value) VALUES (?, ?)");
    ASSERT_TRUE(st.ok());
    st->bind(1, key);
    st->bind(2, value);
    ASSERT_TRUE(st->run("insert").ok());
  }
  sqlite3* get() const { return db_; }

 private:
  sqlite3* db_ = nullptr;
};

}  // namespace gpud::testing
