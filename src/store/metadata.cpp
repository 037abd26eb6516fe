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

Result<std::map<std::string, std::string>> Metadata::all() const {
  std::lock_guard lock(db_.mutex());
  return db_.run_locked(
      "metadata", false, [&](sqlite3* db) -> Result<std::map<std::string, std::string>> {
        auto st = Statement::prepare(db, "SELECT key, value FROM gpud_metadata ORDER BY key");
        if (!st) return st.error();
        std::map<std::string, std::string> out;
        for (;;) {
          int rc = st->step();
          if (rc == SQLITE_DONE) return out;
          if (rc != SQLITE_ROW) return sqlite_error(db, "read metadata");
          out.emplace(st->text(0), st->text(1));
        }
      });
}

Result<std::map<std::string, KernelLogWatermark>> Metadata::kernel_log_watermarks() const {
  std::lock_guard lock(db_.mutex());
  return db_.run_locked(
      "metadata", false, [&](sqlite3* db) -> Result<std::map<std::string, KernelLogWatermark>> {
        // Keys sort between the prefix and the prefix with its last byte raised ('/' + 1 = '0').
        const std::string prefix = kKeyKernelLogWatermarkPrefix;
        std::string end = prefix;
        end.back() = static_cast<char>(end.back() + 1);
        auto st = Statement::prepare(
            db, "SELECT key, value FROM gpud_metadata WHERE key >= ?1 AND key < ?2 ORDER BY key");
        if (!st) return st.error();
        st->bind(1, prefix);
        st->bind(2, end);
        std::map<std::string, KernelLogWatermark> out;
        for (;;) {
          int rc = st->step();
          if (rc == SQLITE_DONE) return out;
          if (rc != SQLITE_ROW) return sqlite_error(db, "read kernel-log watermarks");
          std::string component = st->text(0).substr(prefix.size());
          auto w = parse_kernel_log_watermark(st->text(1));
          if (!w) return make_error(component + ": " + w.error().message);
          out.emplace(std::move(component), std::move(*w));
        }
      });
}

Result<void> Metadata::set_kernel_log_watermark(const std::string& component,
                                                const KernelLogWatermark& w) {
  return set(kKeyKernelLogWatermarkPrefix + component, to_json(w).dump());
}

}  // namespace gpud::store
