// Internal to the store: an RAII prepared statement, sqlite error formatting and the conversion of
// TimePoint bounds to the integer columns (clamped, so TimePoint::min()/max() never overflow).
#pragma once

#include <sqlite3.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <utility>

#include "core/health.h"
#include "core/result.h"

namespace gpud::store {

// "<what>: <sqlite message> (<code>)", read from the connection (callers hold Database::mutex()).
inline Error sqlite_error(sqlite3* db, std::string_view what) {
  std::string msg(what);
  msg += ": ";
  msg += db != nullptr ? sqlite3_errmsg(db) : "no database handle";
  if (db != nullptr) msg += " (" + std::to_string(sqlite3_extended_errcode(db)) + ")";
  return make_error(std::move(msg));
}

class Statement {
 public:
  [[nodiscard]] static Result<Statement> prepare(sqlite3* db, std::string_view sql) {
    sqlite3_stmt* stmt = nullptr;
    int rc = sqlite3_prepare_v2(db, sql.data(), static_cast<int>(sql.size()), &stmt, nullptr);
    if (rc != SQLITE_OK) {
      sqlite3_finalize(stmt);
      return sqlite_error(db, "prepare \"" + std::string(sql) + "\"");
    }
    return Statement(db, stmt);
  }

  ~Statement() { sqlite3_finalize(stmt_); }
  Statement(Statement&& o) noexcept
      : db_(std::exchange(o.db_, nullptr)), stmt_(std::exchange(o.stmt_, nullptr)) {}
  Statement& operator=(Statement&& o) noexcept {
    if (this != &o) {
      sqlite3_finalize(stmt_);
      db_ = std::exchange(o.db_, nullptr);
      stmt_ = std::exchange(o.stmt_, nullptr);
    }
    return *this;
  }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  sqlite3_stmt* get() const { return stmt_; }

  // Binds are 1-based, as in SQLite. Text is copied (SQLITE_TRANSIENT), so temporaries are fine.
  void bind(int i, std::string_view s) {
    sqlite3_bind_text64(stmt_, i, s.data(), s.size(), SQLITE_TRANSIENT, SQLITE_UTF8);
  }
  void bind(int i, int64_t v) { sqlite3_bind_int64(stmt_, i, v); }
  void bind(int i, double v) { sqlite3_bind_double(stmt_, i, v); }
  void bind_null(int i) { sqlite3_bind_null(stmt_, i); }

  // SQLITE_ROW or SQLITE_DONE; anything else is an error (message via sqlite_error()).
  [[nodiscard]] int step() { return sqlite3_step(stmt_); }
  void reset() {
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
  }

  // Runs a statement that returns no rows to completion.
  [[nodiscard]] Result<void> run(std::string_view what) {
    int rc = step();
    if (rc != SQLITE_DONE && rc != SQLITE_ROW) return sqlite_error(db_, what);
    return {};
  }

  std::string text(int col) const {
    const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(stmt_, col));
    if (p == nullptr) return {};
    return std::string(p, static_cast<size_t>(sqlite3_column_bytes(stmt_, col)));
  }
  int64_t int64(int col) const { return sqlite3_column_int64(stmt_, col); }
  bool is_null(int col) const { return sqlite3_column_type(stmt_, col) == SQLITE_NULL; }
  double real(int col) const { return sqlite3_column_double(stmt_, col); }

 private:
  Statement(sqlite3* db, sqlite3_stmt* stmt) : db_(db), stmt_(stmt) {}
  sqlite3* db_ = nullptr;
  sqlite3_stmt* stmt_ = nullptr;
};

// Unix seconds/milliseconds of a bound, rounded down or up. Clock::duration is at least as fine as
// milliseconds and its range is that of int64, so dividing it down cannot overflow, even for
// TimePoint::min() and TimePoint::max().
inline int64_t floor_unix_seconds(TimePoint t) {
  return std::chrono::floor<std::chrono::seconds>(t.time_since_epoch()).count();
}
inline int64_t ceil_unix_seconds(TimePoint t) {
  return std::chrono::ceil<std::chrono::seconds>(t.time_since_epoch()).count();
}
inline int64_t ceil_unix_ms(TimePoint t) {
  return std::chrono::ceil<std::chrono::milliseconds>(t.time_since_epoch()).count();
}
inline int64_t floor_unix_ms(TimePoint t) {
  return std::chrono::floor<std::chrono::milliseconds>(t.time_since_epoch()).count();
}

// A row count for LIMIT or OFFSET; one past int64 becomes -1, which SQLite takes as no limit.
inline int64_t sql_row_count(size_t n) {
  return n > static_cast<size_t>(std::numeric_limits<int64_t>::max()) ? int64_t{-1}
                                                                      : static_cast<int64_t>(n);
}

}  // namespace gpud::store
