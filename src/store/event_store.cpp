#include "store/event_store.h"

#include <limits>
#include <string>

#include "store/statement.h"

namespace gpud::store {
namespace {

constexpr const char* kColumns = "component, unix_seconds, name, type, message, extra_info";

// Compact, with sorted keys (nlohmann objects are std::map); invalid UTF-8 is replaced rather than
// thrown about, since the text may come from a kernel log.
std::string dump_extra_info(const nlohmann::json& j) {
  if (j.is_null()) return "{}";
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

Event read_event(const Statement& st) {
  Event e;
  e.component = st.text(0);
  e.time = TimePoint(std::chrono::seconds(st.int64(1)));
  e.name = st.text(2);
  e.type = parse_event_type(st.text(3)).value_or(EventType::kUnknown);
  e.message = st.text(4);
  // A row edited by hand must not throw: anything but a JSON object reads as an empty one.
  auto extra = nlohmann::json::parse(st.text(5), nullptr, false);
  e.extra_info = extra.is_object() ? std::move(extra) : nlohmann::json::object();
  return e;
}

Result<std::vector<Event>> read_events(sqlite3* db, Statement& st) {
  std::vector<Event> out;
  for (;;) {
    int rc = st.step();
    if (rc == SQLITE_DONE) return out;
    if (rc != SQLITE_ROW) return sqlite_error(db, "query events");
    out.push_back(read_event(st));
  }
}

Result<int> delete_events(sqlite3* db, std::string_view component, int64_t before_s) {
  std::string sql = "DELETE FROM gpud_events WHERE unix_seconds < ?1";
  if (!component.empty()) sql += " AND component = ?2";
  auto st = Statement::prepare(db, sql);
  if (!st) return st.error();
  st->bind(1, before_s);
  if (!component.empty()) st->bind(2, component);
  if (auto r = st->run("delete events"); !r) return r.error();
  return sqlite3_changes(db);
}

}  // namespace

Result<bool> EventStore::insert(const Event& event) {
  std::lock_guard lock(db_.mutex());
  sqlite3* db = db_.handle();
  auto st = Statement::prepare(db, std::string("INSERT OR IGNORE INTO gpud_events(") + kColumns +
                                       ") VALUES(?1, ?2, ?3, ?4, ?5, ?6)");
  if (!st) return st.error();
  st->bind(1, event.component);
  st->bind(2, floor_unix_seconds(event.time));
  st->bind(3, event.name);
  st->bind(4, to_string(event.type));
  st->bind(5, event.message);
  st->bind(6, dump_extra_info(event.extra_info));
  if (auto r = st->run("insert event"); !r) return r.error();
  return sqlite3_changes(db) == 1;
}

Result<std::vector<Event>> EventStore::query(std::string_view component, TimePoint since,
                                             TimePoint until) const {
  // Stored times are whole seconds, so t > since and t <= until compare exactly against the floors.
  std::string sql = std::string("SELECT ") + kColumns +
                    " FROM gpud_events WHERE unix_seconds > ?1 AND unix_seconds <= ?2";
  if (!component.empty()) sql += " AND component = ?3";
  sql += " ORDER BY unix_seconds DESC, id DESC";

  std::lock_guard lock(db_.mutex());
  sqlite3* db = db_.handle();
  auto st = Statement::prepare(db, sql);
  if (!st) return st.error();
  st->bind(1, floor_unix_seconds(since));
  st->bind(2, floor_unix_seconds(until));
  if (!component.empty()) st->bind(3, component);
  return read_events(db, *st);
}

// An empty component purges every component, as an empty component queries all of them.
Result<int> EventStore::purge(std::string_view component, TimePoint before) {
  int64_t before_s =
      before == TimePoint::max() ? std::numeric_limits<int64_t>::max() : ceil_unix_seconds(before);
  std::lock_guard lock(db_.mutex());
  return delete_events(db_.handle(), component, before_s);
}

Result<int> EventStore::enforce_retention(std::chrono::seconds retention, TimePoint now) {
  // In seconds, saturating: a huge retention keeps everything instead of overflowing now -
  // retention.
  int64_t now_s = ceil_unix_seconds(now);
  int64_t keep = retention.count() < 0 ? 0 : retention.count();
  int64_t cutoff = now_s < std::numeric_limits<int64_t>::min() + keep
                       ? std::numeric_limits<int64_t>::min()
                       : now_s - keep;
  std::lock_guard lock(db_.mutex());
  return delete_events(db_.handle(), "", cutoff);
}

Result<std::optional<Event>> EventStore::latest(std::string_view component,
                                                std::string_view name) const {
  std::lock_guard lock(db_.mutex());
  sqlite3* db = db_.handle();
  auto st = Statement::prepare(db, std::string("SELECT ") + kColumns +
                                       " FROM gpud_events WHERE component = ?1 AND name = ?2"
                                       " ORDER BY unix_seconds DESC, id DESC LIMIT 1");
  if (!st) return st.error();
  st->bind(1, component);
  st->bind(2, name);
  int rc = st->step();
  if (rc == SQLITE_DONE) return std::optional<Event>();
  if (rc != SQLITE_ROW) return sqlite_error(db, "query latest event");
  return std::optional<Event>(read_event(*st));
}

}  // namespace gpud::store
