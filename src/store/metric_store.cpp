#include "store/metric_store.h"

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>

#include "store/statement.h"

namespace gpud::store {
namespace {

// Compact JSON with sorted keys (std::map order); '' for no labels, so the primary key stays short.
std::string dump_labels(const std::map<std::string, std::string>& labels) {
  if (labels.empty()) return "";
  return nlohmann::json(labels).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::map<std::string, std::string> parse_labels(const std::string& text) {
  std::map<std::string, std::string> out;
  if (text.empty()) return out;
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (!j.is_object()) return out;  // hand-edited or damaged: no labels rather than a throw
  for (const auto& [k, v] : j.items()) out[k] = v.is_string() ? v.get<std::string>() : v.dump();
  return out;
}

Result<void> exec_simple(sqlite3* db, const char* sql) {
  if (sqlite3_exec(db, sql, nullptr, nullptr, nullptr) != SQLITE_OK) return sqlite_error(db, sql);
  return {};
}

}  // namespace

Result<void> MetricStore::insert(const std::vector<MetricSample>& samples) {
  if (samples.empty()) return {};
  std::lock_guard lock(db_.mutex());
  // On a failure run_locked rolls the open transaction back.
  return db_.run_locked("metric_write", true, [&](sqlite3* db) -> Result<void> {
    auto st = Statement::prepare(db,
                                 "INSERT OR REPLACE INTO gpud_metrics"
                                 "(unix_milliseconds, component, name, labels, value) "
                                 "VALUES(?1, ?2, ?3, ?4, ?5)");
    if (!st) return st.error();
    if (auto r = exec_simple(db, "BEGIN IMMEDIATE"); !r) return r;
    for (const auto& s : samples) {
      // SQLite stores NaN as NULL, which the NOT NULL column refuses; such a sample says nothing
      // anyway.
      if (std::isnan(s.value)) continue;
      st->reset();
      st->bind(1, static_cast<int64_t>(s.unix_ms));
      st->bind(2, s.component);
      st->bind(3, s.name);
      st->bind(4, dump_labels(s.labels));
      st->bind(5, s.value);
      if (auto r = st->run("insert metric sample"); !r) return r;
    }
    return exec_simple(db, "COMMIT");
  });
}

Result<std::vector<MetricSample>> MetricStore::query(std::string_view component,
                                                     TimePoint since) const {
  return query_rows(component, since, std::nullopt, 0, std::numeric_limits<size_t>::max());
}

Result<std::vector<MetricSample>> MetricStore::query_page(std::string_view component,
                                                          TimePoint since, TimePoint until,
                                                          size_t offset, size_t limit) const {
  return query_rows(component, since, until, offset, limit);
}

Result<std::vector<MetricSample>> MetricStore::query_rows(std::string_view component,
                                                          TimePoint since,
                                                          std::optional<TimePoint> until,
                                                          size_t offset, size_t limit) const {
  std::string sql =
      "SELECT unix_milliseconds, component, name, labels, value FROM gpud_metrics "
      "WHERE unix_milliseconds >= ?1";
  if (!component.empty()) sql += " AND component = ?2";
  if (until) sql += " AND unix_milliseconds <= ?3";
  sql += " ORDER BY unix_milliseconds, name, component, labels LIMIT ?4 OFFSET ?5";

  std::lock_guard lock(db_.mutex());
  return db_.run_locked("metric_query", false,
                        [&](sqlite3* db) -> Result<std::vector<MetricSample>> {
                          auto st = Statement::prepare(db, sql);
                          if (!st) return st.error();
                          st->bind(1, ceil_unix_ms(since));
                          if (!component.empty()) st->bind(2, component);
                          if (until) st->bind(3, floor_unix_ms(*until));
                          st->bind(4, sql_row_count(limit));
                          st->bind(5, sql_row_count(offset));
                          std::vector<MetricSample> out;
                          for (;;) {
                            int rc = st->step();
                            if (rc == SQLITE_DONE) break;
                            if (rc != SQLITE_ROW) return sqlite_error(db, "query metrics");
                            MetricSample m;
                            m.unix_ms = st->int64(0);
                            m.component = st->text(1);
                            m.name = st->text(2);
                            m.labels = parse_labels(st->text(3));
                            m.value = st->real(4);
                            out.push_back(std::move(m));
                          }
                          return out;
                        });
}

Result<int> MetricStore::purge(TimePoint before) {
  std::lock_guard lock(db_.mutex());
  return db_.run_locked("metric_purge", true, [&](sqlite3* db) -> Result<int> {
    auto st = Statement::prepare(db, "DELETE FROM gpud_metrics WHERE unix_milliseconds < ?1");
    if (!st) return st.error();
    st->bind(1, ceil_unix_ms(before));
    if (auto r = st->run("purge metrics"); !r) return r.error();
    return sqlite3_changes(db);
  });
}

}  // namespace gpud::store
