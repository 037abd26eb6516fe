#include "store/event_store.h"

#include <algorithm>
#include <limits>
#include <map>
#include <optional>
#include <string>

#include "store/statement.h"

namespace gpud::store {
namespace {

constexpr const char* kColumns =
    "component, unix_seconds, name, type, message, extra_info, acknowledged_unix_seconds, "
    "acknowledged_by";
// How many columns kColumns names (read_event reads them in this order): a query that selects more
// after them finds those from this index on.
constexpr int kColumnCount = 8;

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
  if (!st.is_null(6))
    e.acknowledged = Acknowledgement{TimePoint(std::chrono::seconds(st.int64(6))), st.text(7)};
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

// The event as the database would give it back: whole seconds, extra_info an object that went
// through the same dump.
Event as_stored(const Event& e) {
  Event out = e;
  out.time = TimePoint(std::chrono::seconds(floor_unix_seconds(e.time)));
  out.type = parse_event_type(to_string(e.type)).value_or(EventType::kUnknown);
  auto extra = nlohmann::json::parse(dump_extra_info(e.extra_info), nullptr, false);
  out.extra_info = extra.is_object() ? std::move(extra) : nlohmann::json::object();
  return out;
}

// The columns of the unique index the store deduplicates on, as one string.
std::string dedup_key(const Event& stored) {
  nlohmann::json k = {stored.component, floor_unix_seconds(stored.time),
                      stored.name,      std::string(to_string(stored.type)),
                      stored.message,   dump_extra_info(stored.extra_info)};
  return k.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// Newest first; at the same second the later insert first, as the database orders by id.
bool newer(const Event& a, const Event& b) { return a.time > b.time; }

// SQLite's JSON path ("$.repair_actions[0]") for a JSON pointer ("/repair_actions/0") whose
// segments are names or indexes; other pointers are refused rather than escaped.
Result<std::string> sqlite_json_path(std::string_view pointer) {
  auto refuse = [&] { return make_error("unsupported key path \"" + std::string(pointer) + "\""); };
  if (pointer.size() < 2 || pointer.front() != '/') return refuse();
  std::string out = "$";
  size_t start = 1;
  while (start <= pointer.size()) {
    size_t end = pointer.find('/', start);
    if (end == std::string_view::npos) end = pointer.size();
    const std::string_view seg = pointer.substr(start, end - start);
    if (seg.empty()) return refuse();
    const bool index =
        std::all_of(seg.begin(), seg.end(), [](char c) { return c >= '0' && c <= '9'; });
    const bool name = std::all_of(seg.begin(), seg.end(), [](char c) {
      return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
    });
    if (index)
      out += "[" + std::string(seg) + "]";
    else if (name)
      out += "." + std::string(seg);
    else
      return refuse();
    start = end + 1;
  }
  return out;
}

// The part of a digest key that one key path contributes: the value's JSON text, or a mark for an
// absent value (JSON text never holds a raw control character, so neither can be confused).
constexpr char kKeySeparator = '\x1f';
constexpr char kAbsentValue = '\x01';

std::string waiting_digest_key(const Event& e,
                               const std::vector<nlohmann::json::json_pointer>& ptrs) {
  std::string key = e.name;
  key += kKeySeparator;
  key += to_string(e.type);
  key += kKeySeparator;
  for (const auto& p : ptrs) {
    if (e.extra_info.contains(p))
      key += e.extra_info.at(p).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    else
      key += kAbsentValue;
    key += kKeySeparator;
  }
  return key;
}

// Events fed in the order they happened, grouped on their key and on the interval between splits
// they fall in; each group keeps the handles of its first and last event.
class EventGrouper {
 public:
  explicit EventGrouper(std::vector<TimePoint> splits) : splits_(std::move(splits)) {
    std::sort(splits_.begin(), splits_.end());
  }
  // `time` never decreases from one call to the next.
  void add(TimePoint time, std::string key, uint64_t handle) {
    while (interval_ < splits_.size() && splits_[interval_] < time) ++interval_;
    key += std::to_string(interval_);
    auto [it, fresh] = groups_.try_emplace(std::move(key), Ends{{seq_, handle}, {seq_, handle}, 0});
    if (!fresh) it->second.last = {seq_, handle};
    ++it->second.count;
    ++seq_;
  }
  uint64_t total() const { return seq_; }
  // A kept event: its handle and how many events of its group it stands for (the oldest of a
  // group stands for itself, the newest for the rest).
  struct Kept {
    uint64_t handle = 0;
    uint64_t stands_for = 1;
  };
  // The kept events, oldest first.
  std::vector<Kept> kept() const {
    std::vector<std::pair<uint64_t, Kept>> ends;  // (sequence, kept)
    for (const auto& [key, g] : groups_) {
      ends.push_back({g.first.first, {g.first.second, 1}});
      if (g.last.first != g.first.first)
        ends.push_back({g.last.first, {g.last.second, g.count - 1}});
    }
    std::sort(ends.begin(), ends.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    std::vector<Kept> out;
    for (const auto& e : ends) out.push_back(e.second);
    return out;
  }

 private:
  struct Ends {
    std::pair<uint64_t, uint64_t> first, last;  // (sequence, handle)
    uint64_t count = 0;
  };
  std::vector<TimePoint> splits_;
  size_t interval_ = 0;
  uint64_t seq_ = 0;
  std::map<std::string, Ends> groups_;
};

// Digest handles: a stored row's id, or a waiting event's index with the top bit set.
constexpr uint64_t kWaitingHandle = uint64_t{1} << 63;

}  // namespace

EventStore::EventStore(Database& db, size_t backlog_capacity)
    : db_(db), capacity_(backlog_capacity) {
  MetricRegistry* m = db_.metrics();
  if (m == nullptr) return;
  m->describe(kStoreEventBacklog, "Events held in memory until the state database can write them");
  m->describe(kStoreEventsDroppedTotal,
              "Events lost because the state database could not write and the in-memory backlog "
              "was full",
              MetricKind::kCounter);
  m->set("", kStoreEventBacklog, 0);
  m->add("", kStoreEventsDroppedTotal, 0);
}

namespace {

const std::string kInsertEvent = std::string("INSERT OR IGNORE INTO gpud_events(") + kColumns +
                                 ") VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)";

void bind_event(Statement& st, const Event& event) {
  st.bind(1, event.component);
  st.bind(2, floor_unix_seconds(event.time));
  st.bind(3, event.name);
  st.bind(4, to_string(event.type));
  st.bind(5, event.message);
  st.bind(6, dump_extra_info(event.extra_info));
  if (event.acknowledged) {
    st.bind(7, floor_unix_seconds(event.acknowledged->time));
    st.bind(8, event.acknowledged->by);
  } else {
    st.bind_null(7);
    st.bind_null(8);
  }
}

}  // namespace

Result<bool> EventStore::write_locked(const Event& event) {
  return db_.run_locked("insert", true, [&](sqlite3* db) -> Result<bool> {
    auto st = Statement::prepare(db, kInsertEvent);
    if (!st) return st.error();
    bind_event(*st, event);
    if (auto r = st->run("insert event"); !r) return r.error();
    return sqlite3_changes(db) == 1;
  });
}

Result<std::vector<bool>> EventStore::insert_batch(const std::vector<Event>& events) {
  std::lock_guard lock(db_.mutex());
  flush_locked();
  return db_.run_locked("insert", true, [&](sqlite3* db) -> Result<std::vector<bool>> {
    if (sqlite3_exec(db, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr) != SQLITE_OK)
      return sqlite_error(db, "begin a batch of events");
    auto st = Statement::prepare(db, kInsertEvent);
    if (!st) return st.error();
    std::vector<bool> added;
    added.reserve(events.size());
    for (const Event& e : events) {
      st->reset();
      bind_event(*st, e);
      if (auto r = st->run("insert event"); !r) return r.error();
      added.push_back(sqlite3_changes(db) == 1);
    }
    if (sqlite3_exec(db, "COMMIT", nullptr, nullptr, nullptr) != SQLITE_OK)
      return sqlite_error(db, "commit a batch of events");
    return added;
  });
}

void EventStore::flush_locked() {
  size_t before = backlog_.size();
  while (!backlog_.empty()) {
    if (!write_locked(backlog_.front().event)) break;
    keys_.erase(backlog_.front().key);
    backlog_.pop_front();
  }
  if (backlog_.size() != before) publish_backlog_locked();
}

Result<bool> EventStore::enqueue_locked(const Event& event) {
  Waiting w{as_stored(event), ""};
  w.key = dedup_key(w.event);
  if (keys_.count(w.key) != 0) return false;
  // Already stored (a kernel-log ring re-read while the disk is full)? Reads usually still work
  // when writes do not; when this one fails too, the write's INSERT OR IGNORE still keeps the
  // table free of duplicates.
  auto stored = db_.run_locked("query", false, [&](sqlite3* db) -> Result<bool> {
    auto st = Statement::prepare(db,
                                 "SELECT 1 FROM gpud_events WHERE component = ?1 AND "
                                 "unix_seconds = ?2 AND name = ?3 AND type = ?4 AND message = ?5 "
                                 "AND extra_info = ?6 LIMIT 1");
    if (!st) return st.error();
    st->bind(1, w.event.component);
    st->bind(2, floor_unix_seconds(w.event.time));
    st->bind(3, w.event.name);
    st->bind(4, to_string(w.event.type));
    st->bind(5, w.event.message);
    st->bind(6, dump_extra_info(w.event.extra_info));
    int rc = st->step();
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) return sqlite_error(db, "look up event");
    return rc == SQLITE_ROW;
  });
  if (stored && *stored) return false;
  if (backlog_.size() >= capacity_) {
    ++dropped_;
    if (MetricRegistry* m = db_.metrics()) m->add("", kStoreEventsDroppedTotal, 1);
    return make_error("the state database cannot write and " + std::to_string(capacity_) +
                      " events already wait for it: event dropped");
  }
  backlog_.push_back(std::move(w));
  keys_.insert(backlog_.back().key);
  publish_backlog_locked();
  return true;
}

void EventStore::rebuild_keys_locked() {
  keys_.clear();
  for (const Waiting& w : backlog_) keys_.insert(w.key);
}

void EventStore::publish_backlog_locked() {
  if (MetricRegistry* m = db_.metrics())
    m->set("", kStoreEventBacklog, static_cast<double>(backlog_.size()));
}

Result<bool> EventStore::insert(const Event& event) {
  std::lock_guard lock(db_.mutex());
  flush_locked();
  if (backlog_.empty()) {
    if (auto r = write_locked(event); r) return r;
  }
  return enqueue_locked(event);
}

Result<std::vector<Event>> EventStore::query(std::string_view component, TimePoint since,
                                             TimePoint until) const {
  return query_rows(component, since, until, 0, std::numeric_limits<size_t>::max());
}

Result<std::vector<Event>> EventStore::query_page(std::string_view component, TimePoint since,
                                                  TimePoint until, size_t offset,
                                                  size_t limit) const {
  return query_rows(component, since, until, offset, limit);
}

Result<std::vector<Event>> EventStore::query_rows(std::string_view component, TimePoint since,
                                                  TimePoint until, size_t offset,
                                                  size_t limit) const {
  const size_t end = limit > std::numeric_limits<size_t>::max() - offset
                         ? std::numeric_limits<size_t>::max()
                         : offset + limit;
  // Stored times are whole seconds, so t > since and t <= until compare exactly against the floors.
  const int64_t since_s = floor_unix_seconds(since);
  const int64_t until_s = floor_unix_seconds(until);
  std::string sql = std::string("SELECT ") + kColumns +
                    " FROM gpud_events WHERE unix_seconds > ?1 AND unix_seconds <= ?2";
  if (!component.empty()) sql += " AND component = ?3";
  sql += " ORDER BY unix_seconds DESC, id DESC LIMIT ?4 OFFSET ?5";

  std::lock_guard lock(db_.mutex());
  // With events waiting, the page's rows may be any of the first offset + limit stored ones.
  const bool merge = !backlog_.empty();
  auto stored = db_.run_locked("query", false, [&](sqlite3* db) -> Result<std::vector<Event>> {
    auto st = Statement::prepare(db, sql);
    if (!st) return st.error();
    st->bind(1, since_s);
    st->bind(2, until_s);
    if (!component.empty()) st->bind(3, component);
    st->bind(4, sql_row_count(merge ? end : limit));
    st->bind(5, sql_row_count(merge ? 0 : offset));
    return read_events(db, *st);
  });
  if (!stored || !merge) return stored;
  auto page = [&](std::vector<Event> all) {
    if (offset == 0 && all.size() <= limit) return all;
    std::vector<Event> out;
    for (size_t i = offset; i < all.size() && i < end; ++i) out.push_back(std::move(all[i]));
    return out;
  };

  std::vector<Event> out;
  std::unordered_set<std::string_view> waiting_keys;
  std::optional<TimePoint> oldest_waiting;
  for (auto it = backlog_.rbegin(); it != backlog_.rend(); ++it) {
    const Event& e = it->event;
    const int64_t t = floor_unix_seconds(e.time);
    if (t <= since_s || t > until_s) continue;
    if (!component.empty() && e.component != component) continue;
    out.push_back(e);
    waiting_keys.insert(it->key);
    if (!oldest_waiting || e.time < *oldest_waiting) oldest_waiting = e.time;
  }
  if (out.empty()) return page(std::move(*stored));
  // A waiting event may be stored too when the database wrote it but reported a failure; it is
  // listed once.
  for (Event& e : *stored) {
    if (e.time >= *oldest_waiting && waiting_keys.count(dedup_key(e)) != 0) continue;
    out.push_back(std::move(e));
  }
  std::stable_sort(out.begin(), out.end(), newer);
  return page(std::move(out));
}

Result<EventDigest> EventStore::digest(std::string_view component, TimePoint since, TimePoint until,
                                       const std::vector<std::string>& key_paths,
                                       const std::vector<TimePoint>& splits) const {
  std::vector<std::string> sql_paths;
  std::vector<nlohmann::json::json_pointer> pointers;
  for (const std::string& p : key_paths) {
    auto path = sqlite_json_path(p);
    if (!path) return path.error();
    sql_paths.push_back(std::move(*path));
    pointers.emplace_back(p);
  }
  const int64_t since_s = floor_unix_seconds(since);
  const int64_t until_s = floor_unix_seconds(until);
  constexpr int kIdColumn = kColumnCount;
  constexpr int kKeyColumn = kColumnCount + 1;
  std::string sql = std::string("SELECT ") + kColumns + ", id";
  // A row edited into invalid JSON reads as an empty object, as read_event takes it.
  for (size_t i = 0; i < sql_paths.size(); ++i)
    sql += ", iif(json_valid(extra_info), extra_info -> ?" + std::to_string(i + 4) + ", NULL)";
  sql +=
      " FROM gpud_events WHERE component = ?1 AND unix_seconds > ?2 AND unix_seconds <= ?3"
      " AND acknowledged_unix_seconds IS NULL ORDER BY unix_seconds, id";

  std::lock_guard lock(db_.mutex());
  // Waiting events in range, oldest first; at the same second they follow the stored ones (the
  // order query() gives).
  std::vector<uint64_t> waiting;
  std::unordered_set<std::string_view> waiting_keys;
  for (size_t i = 0; i < backlog_.size(); ++i) {
    const Event& e = backlog_[i].event;
    const int64_t t = floor_unix_seconds(e.time);
    if (t <= since_s || t > until_s || e.component != component || e.acknowledged) continue;
    waiting.push_back(i);
    waiting_keys.insert(backlog_[i].key);
  }
  std::stable_sort(waiting.begin(), waiting.end(), [&](uint64_t a, uint64_t b) {
    return backlog_[a].event.time < backlog_[b].event.time;
  });

  uint64_t total = 0;
  auto kept =
      db_.run_locked("query", false, [&](sqlite3* db) -> Result<std::vector<EventGrouper::Kept>> {
        EventGrouper grouper(splits);
        size_t next_waiting = 0;
        auto add_waiting_before = [&](std::optional<TimePoint> t) {
          for (; next_waiting < waiting.size(); ++next_waiting) {
            const Event& e = backlog_[waiting[next_waiting]].event;
            if (t && e.time >= *t) return;
            grouper.add(e.time, waiting_digest_key(e, pointers),
                        kWaitingHandle | waiting[next_waiting]);
          }
        };
        auto st = Statement::prepare(db, sql);
        if (!st) return st.error();
        st->bind(1, component);
        st->bind(2, since_s);
        st->bind(3, until_s);
        for (size_t i = 0; i < sql_paths.size(); ++i)
          st->bind(static_cast<int>(i + 4), sql_paths[i]);
        for (;;) {
          const int rc = st->step();
          if (rc == SQLITE_DONE) break;
          if (rc != SQLITE_ROW) return sqlite_error(db, "digest events");
          const TimePoint t{std::chrono::seconds(st->int64(1))};
          // A waiting event the database wrote while reporting a failure is counted once.
          if (!waiting.empty() && t >= backlog_[waiting.front()].event.time &&
              waiting_keys.count(dedup_key(read_event(*st))) != 0)
            continue;
          add_waiting_before(t);
          std::string key = st->text(2);
          key += kKeySeparator;
          key += st->text(3);
          key += kKeySeparator;
          for (size_t i = 0; i < sql_paths.size(); ++i) {
            const int col = kKeyColumn + static_cast<int>(i);
            if (sqlite3_column_type(st->get(), col) == SQLITE_NULL)
              key += kAbsentValue;
            else
              key += st->text(col);
            key += kKeySeparator;
          }
          grouper.add(t, std::move(key), static_cast<uint64_t>(st->int64(kIdColumn)));
        }
        add_waiting_before(std::nullopt);
        total = grouper.total();
        return grouper.kept();
      });
  if (!kept) return kept.error();

  EventDigest out;
  out.total = total;
  auto rows = db_.run_locked("query", false, [&](sqlite3* db) -> Result<std::vector<Event>> {
    auto st = Statement::prepare(
        db, std::string("SELECT ") + kColumns + " FROM gpud_events WHERE id = ?1");
    if (!st) return st.error();
    std::vector<Event> events;
    for (auto it = kept->rbegin(); it != kept->rend(); ++it) {
      out.counts.push_back(it->stands_for);
      if ((it->handle & kWaitingHandle) != 0) {
        events.push_back(backlog_[it->handle & ~kWaitingHandle].event);
        continue;
      }
      st->reset();
      st->bind(1, static_cast<int64_t>(it->handle));
      if (st->step() != SQLITE_ROW) return sqlite_error(db, "read digested event");
      events.push_back(read_event(*st));
    }
    return events;
  });
  if (!rows) return rows.error();
  out.events = std::move(*rows);
  return out;
}

// An empty component purges every component, as an empty component queries all of them.
Result<int> EventStore::purge(std::string_view component, TimePoint before) {
  int64_t before_s =
      before == TimePoint::max() ? std::numeric_limits<int64_t>::max() : ceil_unix_seconds(before);
  std::lock_guard lock(db_.mutex());
  size_t waiting = backlog_.size();
  std::erase_if(backlog_, [&](const Waiting& w) {
    return (component.empty() || w.event.component == component) &&
           floor_unix_seconds(w.event.time) < before_s;
  });
  const int forgotten = static_cast<int>(waiting - backlog_.size());
  if (forgotten > 0) {
    rebuild_keys_locked();
    publish_backlog_locked();
  }
  auto deleted = db_.run_locked(
      "purge", true, [&](sqlite3* db) { return delete_events(db, component, before_s); });
  if (!deleted) return deleted.error();
  return *deleted + forgotten;
}

Result<int> EventStore::acknowledge(std::string_view component, TimePoint until,
                                    const Acknowledgement& ack) {
  const int64_t until_s = floor_unix_seconds(until);
  const Acknowledgement stored{TimePoint(std::chrono::seconds(floor_unix_seconds(ack.time))),
                               ack.by};
  std::lock_guard lock(db_.mutex());
  int waiting = 0;
  for (Waiting& w : backlog_)
    if (w.event.component == component && floor_unix_seconds(w.event.time) <= until_s &&
        !w.event.acknowledged) {
      w.event.acknowledged = stored;
      ++waiting;
    }
  auto marked = db_.run_locked("acknowledge", true, [&](sqlite3* db) -> Result<int> {
    auto st = Statement::prepare(
        db,
        "UPDATE gpud_events SET acknowledged_unix_seconds = ?1, acknowledged_by = ?2 "
        "WHERE component = ?3 AND unix_seconds <= ?4 AND acknowledged_unix_seconds IS NULL");
    if (!st) return st.error();
    st->bind(1, floor_unix_seconds(stored.time));
    st->bind(2, stored.by);
    st->bind(3, component);
    st->bind(4, until_s);
    if (auto r = st->run("acknowledge events"); !r) return r.error();
    return sqlite3_changes(db);
  });
  if (!marked) return marked.error();
  return *marked + waiting;
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
  size_t waiting = backlog_.size();
  std::erase_if(backlog_,
                [&](const Waiting& w) { return floor_unix_seconds(w.event.time) < cutoff; });
  const int forgotten = static_cast<int>(waiting - backlog_.size());
  if (forgotten > 0) {
    rebuild_keys_locked();
    publish_backlog_locked();
  }
  auto deleted =
      db_.run_locked("purge", true, [&](sqlite3* db) { return delete_events(db, "", cutoff); });
  if (!deleted) return deleted.error();
  return *deleted + forgotten;
}

Result<std::optional<Event>> EventStore::latest(std::string_view component,
                                                std::string_view name) const {
  std::lock_guard lock(db_.mutex());
  auto stored = db_.run_locked("query", false, [&](sqlite3* db) -> Result<std::optional<Event>> {
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
  });
  if (!stored) return stored;
  // Waiting events came after every stored one: at the same second a waiting one wins, and among
  // waiting ones the later (the first met, going from the back).
  std::optional<Event> best = std::move(*stored);
  bool best_waits = false;
  for (auto it = backlog_.rbegin(); it != backlog_.rend(); ++it) {
    const Event& e = it->event;
    if (e.component != component || e.name != name) continue;
    if (!best || e.time > best->time || (e.time == best->time && !best_waits)) {
      best = e;
      best_waits = true;
    }
  }
  return best;
}

size_t EventStore::retry() {
  std::lock_guard lock(db_.mutex());
  db_.retry_reopen_locked();
  flush_locked();
  return backlog_.size();
}

size_t EventStore::backlog_size() const {
  std::lock_guard lock(db_.mutex());
  return backlog_.size();
}

uint64_t EventStore::dropped() const {
  std::lock_guard lock(db_.mutex());
  return dropped_;
}

}  // namespace gpud::store
