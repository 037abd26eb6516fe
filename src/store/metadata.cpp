#include "store/metadata.h"

#include "store/statement.h"

namespace gpud::store {

Result<std::optional<std::string>> Metadata::get(const std::string& key) const {
  std::lock_guard lock(db_.mutex());
  return db_.run_locked("metadata", false, [&](sqlite3* db) -> Result<std::optional<std::string>> {
    auto st = Statement::prepare(db, "SELECT value FROM gpud_metadata WHERE key = ?1");
    if (!st) return st.error();
    st->bind(1, key);
    int rc = st->step();
    if (rc == SQLITE_DONE) return std::optional<std::string>();
    if (rc != SQLITE_ROW) return sqlite_error(db, "get metadata " + key);
    return std::optional<std::string>(st->text(0));
  });
}

Result<void> Metadata::set(const std::string& key, const std::string& value) {
  std::lock_guard lock(db_.mutex());
  return db_.run_locked("metadata", true, [&](sqlite3* db) -> Result<void> {
    auto st = Statement::prepare(db,
                                 "INSERT INTO gpud_metadata(key, value) VALUES(?1, ?2) "
                                 "ON CONFLICT(key) DO UPDATE SET value = excluded.value");
    if (!st) return st.error();
    st->bind(1, key);
    st->bind(2, value);
    return st->run("set metadata " + key);
  });
}

}  // namespace gpud::store
