#include "store/gpud_state_import.h"

#include <sqlite3.h>

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <initializer_list>
#include <limits>
#include <set>
#include <system_error>
#include <utility>

#include "core/pci_address.h"
#include "core/time_util.h"
#include "store/statement.h"

namespace gpud::store {
namespace {

// GPUd's schemas, facts from github.com/leptonai/gpud at commit 4a8de33a (pkg/eventstore/
// database.go, pkg/metadata/metadata.go): event tables "components_<name>_events_v0_5_0" with
// columns timestamp (unix seconds), name, type, message (NULL when empty), extra_info (a JSON
// object of strings, NULL when empty); GPUd before v0.5 used "..._v0_4_0" with the same columns
// and one more (suggested_actions). Metadata: gpud_metadata(key, value), GPUd before v0.5 kept the
// machine id in machine_metadata(machine_id, ...).
constexpr std::string_view kSchemaCurrent = "v0_5_0";
constexpr std::string_view kSchemaBeforeV05 = "v0_4_0";
constexpr std::string_view kMetadataTable = "gpud_metadata";
constexpr std::string_view kMetadataTableBeforeV05 = "machine_metadata";
// Tables only GPUd creates besides its event tables (pkg/metrics/store, pkg/session/states,
// pkg/pstore, the InfiniBand store).
constexpr std::string_view kOtherGpudTables[] = {"gpud_metrics_v0_5", "session_states", "os_pstore",
                                                 "infiniband_device_port_history_v0_5_1",
                                                 "infiniband_metadata_v0_5_1"};
// gpud's own tables (database.cpp).
constexpr std::string_view kOwnEventsTable = "gpud_events";

// GPUd records Xid and SXid events with extra_info {"device_uuid": "PCI:0000:9b:00", "data": ...},
// "data" the code (SXid; Xid in older GPUd) or a JSON object with the code as "xid"
// (components/accelerator/nvidia/xid/component.go, sxid/component.go). gpud's rules read the code
// and the device from "xid"/"sxid" and "pci_bus_id" (components/nvidia/xid.cpp).
constexpr std::string_view kXidComponent = "accelerator-nvidia-error-xid";
constexpr std::string_view kSxidComponent = "accelerator-nvidia-error-sxid";

// Events written in one transaction: at most this many rows' values (each cut to the bounds
// above) are held at once.
constexpr size_t kImportBatch = 256;

constexpr std::string_view kImportedFromKey = "imported_from";
constexpr std::string_view kImportedFromValue = "GPUd";

// `path` as the path part of a file: URI: the characters a URI gives a meaning to are escaped.
std::string uri_path(const std::string& path) {
  std::string out;
  for (char c : path) {
    if (c == '%' || c == '?' || c == '#') {
      constexpr char kHex[] = "0123456789ABCDEF";
      out += '%';
      out += kHex[(static_cast<unsigned char>(c) >> 4) & 0xF];
      out += kHex[static_cast<unsigned char>(c) & 0xF];
    } else {
      out += c;
    }
  }
  return out;
}

// A read-only connection to GPUd's file that never checkpoints a WAL into it on close.
class ReadOnlyConnection {
 public:
  static Result<ReadOnlyConnection> open(const std::string& path) {
    // Without a -wal file everything is in the main file, and nothing writes it (GPUd is stopped:
    // its file was moved, or gpud's store holds the lock): opened as immutable, SQLite takes no
    // locks and creates no -wal or -shm beside it. A WAL left behind must be read, which needs
    // SQLite's -shm index.
    std::error_code ec;
    const bool wal = std::filesystem::exists(path + "-wal", ec);
    const std::string name = wal ? path : "file:" + uri_path(path) + "?immutable=1";
    sqlite3* db = nullptr;
    int rc = sqlite3_open_v2(
        name.c_str(), &db, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX | (wal ? 0 : SQLITE_OPEN_URI),
        nullptr);
    if (rc != SQLITE_OK) {
      std::string msg = db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
      sqlite3_close_v2(db);
      return make_error("open " + path + " read-only: " + msg);
    }
    ReadOnlyConnection c(db);
    sqlite3_extended_result_codes(db, 1);
    sqlite3_busy_timeout(db, 5000);
    sqlite3_db_config(db, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, nullptr);
    sqlite3_limit(db, SQLITE_LIMIT_LENGTH, kGpudImportMaxValueBytes);
    return c;
  }
  ~ReadOnlyConnection() { sqlite3_close_v2(db_); }
  ReadOnlyConnection(ReadOnlyConnection&& o) noexcept : db_(std::exchange(o.db_, nullptr)) {}
  ReadOnlyConnection& operator=(ReadOnlyConnection&&) = delete;
  ReadOnlyConnection(const ReadOnlyConnection&) = delete;
  sqlite3* get() const { return db_; }

 private:
  explicit ReadOnlyConnection(sqlite3* db) : db_(db) {}
  sqlite3* db_ = nullptr;
};

// The names of the file's tables; the first read of the file, so a file that is no SQLite
// database (or a damaged one) fails here.
Result<std::set<std::string>> table_names(sqlite3* db, const std::string& path) {
  auto st = Statement::prepare(db, "SELECT name FROM sqlite_master WHERE type = 'table'");
  if (!st) return make_error(path + " is not a readable SQLite database: " + st.error().message);
  std::set<std::string> out;
  for (;;) {
    int rc = st->step();
    if (rc == SQLITE_DONE) return out;
    if (rc != SQLITE_ROW)
      return make_error(path + " is not a readable SQLite database: " + sqlite3_errmsg(db));
    out.insert(st->text(0));
  }
}

bool is_gpud_events_table(const std::string& name) {
  return name.starts_with("components_") &&
         (name.ends_with("_events_" + std::string(kSchemaCurrent)) ||
          name.ends_with("_events_" + std::string(kSchemaBeforeV05)));
}

Result<StateFileKind> kind_of(sqlite3* db, const std::set<std::string>& tables) {
  if (tables.empty()) return StateFileKind::kAbsent;
  bool ours = tables.count(std::string(kOwnEventsTable)) != 0;
  if (!ours && tables.count(std::string(kMetadataTable)) != 0) {
    // Both keep a gpud_metadata table; only gpud records its schema version there.
    auto st = Statement::prepare(db, "SELECT 1 FROM gpud_metadata WHERE key = ?1");
    if (!st) return st.error();
    st->bind(1, std::string_view(kKeySchemaVersion));
    int rc = st->step();
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) return sqlite_error(db, "read gpud_metadata");
    ours = rc == SQLITE_ROW;
  }
  bool theirs = false;
  for (const std::string& t : tables)
    if (is_gpud_events_table(t) || t == kMetadataTableBeforeV05) theirs = true;
  for (std::string_view t : kOtherGpudTables)
    if (tables.count(std::string(t)) != 0) theirs = true;
  // gpud_metadata alone is GPUd's when gpud recorded no version in it.
  if (!ours && tables.count(std::string(kMetadataTable)) != 0) theirs = true;
  if (ours) return theirs ? StateFileKind::kGpudInGpudGo : StateFileKind::kGpud;
  return theirs ? StateFileKind::kGpudGo : StateFileKind::kOther;
}

// `s` cut to at most `max` bytes without splitting a UTF-8 sequence.
void truncate_utf8(std::string& s, size_t max) {
  if (s.size() <= max) return;
  size_t n = max;
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
  s.resize(n);
}

std::optional<int64_t> parse_int(std::string_view s) {
  int64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return v;
}

// GPUd's Xid/SXid extra_info, in the keys gpud's rules read, beside GPUd's own; the message gpud
// would show when GPUd stored none.
void translate_error_event(Event& e, std::string_view code_key, std::string_view label) {
  nlohmann::json& x = e.extra_info;
  std::optional<int64_t> code;
  if (auto it = x.find("data"); it != x.end() && it->is_string()) {
    const std::string& data = it->get_ref<const std::string&>();
    code = parse_int(data);
    if (!code) {
      auto detail = nlohmann::json::parse(data, nullptr, false);
      if (detail.is_object() && detail.contains(code_key) && detail[code_key].is_number_integer())
        code = detail[code_key].get<int64_t>();
    }
  }
  if (code && *code > 0 && *code <= std::numeric_limits<int>::max()) x[code_key] = *code;
  std::string device;
  if (auto it = x.find("device_uuid"); it != x.end() && it->is_string()) {
    std::string_view d = it->get_ref<const std::string&>();
    if (d.starts_with("PCI:")) {
      device = normalize_pci_bus_id(d.substr(4));
      x["pci_bus_id"] = device;
    } else if (d.starts_with("GPU-")) {
      device = std::string(d);
      x["gpu_uuid"] = device;
    }
  }
  if (e.message.empty() && x.contains(code_key))
    e.message = std::string(label) + " " + std::to_string(x[code_key].get<int64_t>()) +
                (device.empty() ? "" : " on " + device) + " (imported from GPUd)";
}

struct TableReader {
  sqlite3* db;
  const std::string& table;
  const std::string& component;
  const GpudImportOptions& options;
  EventStore& events;
  GpudImportReport& report;
  std::vector<Event> pending = {};  // written kImportBatch at a time, in one transaction each

  std::string quoted() const { return "\"" + table + "\""; }

  Result<int64_t> count(const std::string& where, std::initializer_list<int64_t> binds) const {
    auto st = Statement::prepare(db, "SELECT count(*) FROM " + quoted() + " WHERE " + where);
    if (!st) return st.error();
    int i = 0;
    for (int64_t v : binds) st->bind(++i, v);
    if (st->step() != SQLITE_ROW) return sqlite_error(db, "count rows");
    return st->int64(0);
  }

  // Reads the rows in the window newest first, up to the cap, and stores each.
  Result<void> run(int64_t cutoff_s, int64_t future_s) {
    constexpr const char* kInWindow =
        "typeof(timestamp) = 'integer' AND timestamp >= ?1 AND timestamp <= ?2";
    auto older = count("typeof(timestamp) = 'integer' AND timestamp < ?1", {cutoff_s});
    if (!older) return older.error();
    auto future = count("typeof(timestamp) = 'integer' AND timestamp > ?1", {future_s});
    if (!future) return future.error();
    auto untyped = count("typeof(timestamp) <> 'integer'", {});
    if (!untyped) return untyped.error();
    auto in_window = count(kInWindow, {cutoff_s, future_s});
    if (!in_window) return in_window.error();
    report.skipped_older += static_cast<uint64_t>(*older);
    report.skipped_future += static_cast<uint64_t>(*future);
    report.skipped_malformed += static_cast<uint64_t>(*untyped);
    const auto cap = static_cast<int64_t>(
        std::min<size_t>(options.max_events_per_component, std::numeric_limits<int64_t>::max()));
    // Counted per table: the v0_4_0 table of a component shares the cap of its v0_5_0 one.
    const int64_t already = static_cast<int64_t>(report.read_by_component[component]);
    const int64_t room = std::max<int64_t>(0, cap - already);
    if (*in_window > room) report.skipped_beyond_cap += static_cast<uint64_t>(*in_window - room);

    // Row ids first (their columns are small), then each row: a value SQLite refuses to read
    // (over kGpudImportMaxValueBytes) costs that row, not the table.
    auto ids = Statement::prepare(db, "SELECT rowid FROM " + quoted() + " WHERE " + kInWindow +
                                          " ORDER BY timestamp DESC, rowid DESC LIMIT ?3");
    if (!ids) return ids.error();
    ids->bind(1, cutoff_s);
    ids->bind(2, future_s);
    ids->bind(3, room);
    auto row = Statement::prepare(
        db,
        "SELECT timestamp, name, type, substr(message, 1, ?2), length(CAST(message AS BLOB)), "
        "extra_info FROM " +
            quoted() + " WHERE rowid = ?1");
    if (!row) return row.error();
    for (;;) {
      int rc = ids->step();
      if (rc == SQLITE_DONE) return flush();
      if (rc != SQLITE_ROW) {
        Error e = sqlite_error(db, "read row ids");
        if (auto r = flush(); !r) return r;  // what was read before the damage is kept
        return e;
      }
      row->reset();
      row->bind(1, ids->int64(0));
      row->bind(2, static_cast<int64_t>(kGpudImportMaxMessageBytes));
      rc = row->step();
      if ((rc & 0xff) == SQLITE_TOOBIG) {
        ++report.skipped_too_big;
        continue;
      }
      if (rc != SQLITE_ROW) {
        Error e = sqlite_error(db, "read row");
        if (auto r = flush(); !r) return r;
        return e;
      }
      ++report.read_by_component[component];
      add_row(*row);
      if (pending.size() >= kImportBatch) {
        if (auto r = flush(); !r) return r;
      }
    }
  }

  Result<void> flush() {
    if (pending.empty()) return {};
    auto added = events.insert_batch(pending);
    if (!added) return make_error("store events: " + added.error().message);
    for (size_t i = 0; i < pending.size(); ++i) {
      if (!(*added)[i]) continue;
      ++report.stored_by_component[component];
      if (component == "os" && pending[i].name == "reboot") ++report.reboots_stored;
    }
    pending.clear();
    return {};
  }

  void add_row(const Statement& row) {
    Event e;
    e.component = component;
    e.time = from_unix_seconds(row.int64(0));
    e.name = row.text(1);
    if (e.name.empty() || e.name.size() > kGpudImportMaxNameBytes) {
      ++report.skipped_malformed;
      return;
    }
    // GPUd stores "" for an Xid it found no detail for; any type gpud does not know reads Unknown.
    std::string type = row.text(2);
    e.type = type.size() <= 16 ? parse_event_type(type).value_or(EventType::kUnknown)
                               : EventType::kUnknown;
    // substr() cut the message to as many characters; the bytes are cut here.
    e.message = row.text(3);
    truncate_utf8(e.message, kGpudImportMaxMessageBytes);
    if (row.int64(4) > static_cast<int64_t>(kGpudImportMaxMessageBytes))
      ++report.messages_truncated;
    e.extra_info = nlohmann::json::object();
    if (!row.is_null(5)) {
      std::string text = row.text(5);
      auto parsed = text.size() <= kGpudImportMaxExtraInfoBytes
                        ? nlohmann::json::parse(text, nullptr, false)
                        : nlohmann::json();
      if (parsed.is_object())
        e.extra_info = std::move(parsed);
      else if (!text.empty())
        ++report.extra_info_dropped;
    }
    if (component == kXidComponent) translate_error_event(e, "xid", "XID");
    if (component == kSxidComponent) translate_error_event(e, "sxid", "SXID");
    e.extra_info[std::string(kImportedFromKey)] = std::string(kImportedFromValue);
    pending.push_back(std::move(e));
  }
};

// GPUd's machine id: gpud_metadata's, else (GPUd before v0.5) machine_metadata's.
Result<std::optional<std::string>> read_machine_id(sqlite3* db,
                                                   const std::set<std::string>& tables) {
  std::vector<std::string> queries;
  if (tables.count(std::string(kMetadataTable)) != 0)
    queries.push_back("SELECT value FROM gpud_metadata WHERE key = 'machine_id'");
  if (tables.count(std::string(kMetadataTableBeforeV05)) != 0)
    queries.push_back("SELECT machine_id FROM machine_metadata LIMIT 1");
  for (const std::string& q : queries) {
    auto st = Statement::prepare(db, q);
    if (!st) return st.error();
    int rc = st->step();
    if (rc == SQLITE_DONE) continue;
    if (rc != SQLITE_ROW) return sqlite_error(db, "read GPUd's machine id");
    std::string id = st->text(0);
    // An id is printable and short; anything else is not taken as the node's identity.
    const bool printable = std::all_of(id.begin(), id.end(), [](char c) {
      return static_cast<unsigned char>(c) > 0x20 && static_cast<unsigned char>(c) < 0x7f;
    });
    if (!id.empty() && id.size() <= kGpudImportMaxNameBytes && printable)
      return std::optional<std::string>(std::move(id));
  }
  return std::optional<std::string>();
}

}  // namespace

std::string gpud_events_table(std::string_view component, std::string_view schema) {
  std::string c;
  for (char ch : component) c += (ch == ' ' || ch == '-') ? '_' : ch;
  // One pass over "__", as GPUd's strings.ReplaceAll does.
  std::string once;
  for (size_t i = 0; i < c.size(); ++i) {
    if (c[i] == '_' && i + 1 < c.size() && c[i + 1] == '_') {
      once += '_';
      ++i;
    } else {
      once += c[i];
    }
  }
  std::transform(once.begin(), once.end(), once.begin(),
                 [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
  return "components_" + once + "_events_" + std::string(schema);
}

Result<StateFileKind> inspect_state_file(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec) || std::filesystem::file_size(path, ec) == 0)
    return StateFileKind::kAbsent;
  auto conn = ReadOnlyConnection::open(path);
  if (!conn) return conn.error();
  auto tables = table_names(conn->get(), path);
  if (!tables) return tables.error();
  return kind_of(conn->get(), *tables);
}

Result<std::string> move_gpud_state_aside(const std::string& path) {
  namespace fs = std::filesystem;
  const std::string target = path + kGpudStateMovedSuffix;
  constexpr const char* kSides[] = {"", "-wal", "-shm", "-journal"};
  std::error_code ec;
  for (const char* side : kSides)
    if (fs::exists(target + side, ec))
      return make_error("cannot move GPUd's state file " + path + " aside: " + target + side +
                        " exists already");
  // The main file first: should a side file then fail to move, SQLite would not pair it with
  // gpud's new store (a WAL is only read beside the file it belongs to).
  for (const char* side : kSides) {
    if (!fs::exists(path + side, ec)) continue;
    fs::rename(path + side, target + side, ec);
    if (ec) return make_error("move " + path + side + " to " + target + side + ": " + ec.message());
  }
  return target;
}

uint64_t GpudImportReport::events_stored() const {
  uint64_t n = 0;
  for (const auto& [c, k] : stored_by_component) n += k;
  return n;
}

nlohmann::json to_json(const GpudImportReport& r) {
  uint64_t read = 0;
  for (const auto& [c, k] : r.read_by_component) read += k;
  nlohmann::json j = {
      {"source", r.source},
      {"events_read", read},
      {"events_stored", r.events_stored()},
      {"reboots_stored", r.reboots_stored},
      {"read_by_component", r.read_by_component},
      {"stored_by_component", r.stored_by_component},
      {"skipped",
       {{"older_than_retention", r.skipped_older},
        {"in_the_future", r.skipped_future},
        {"beyond_cap", r.skipped_beyond_cap},
        {"malformed", r.skipped_malformed},
        {"too_big", r.skipped_too_big}}},
      {"messages_truncated", r.messages_truncated},
      {"extra_info_dropped", r.extra_info_dropped},
      {"tables_without_component", r.tables_without_component},
      {"table_errors", r.table_errors},
  };
  j["machine_id"] = r.machine_id ? nlohmann::json(*r.machine_id) : nlohmann::json();
  if (r.previous_machine_id) j["previous_machine_id"] = *r.previous_machine_id;
  return j;
}

Result<GpudImportReport> import_gpud_state(const std::string& path, EventStore& events,
                                           Metadata& metadata, const GpudImportOptions& options) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))
    return make_error("no GPUd state file at " + path);
  auto conn = ReadOnlyConnection::open(path);
  if (!conn) return conn.error();
  sqlite3* db = conn->get();
  auto tables = table_names(db, path);
  if (!tables) return tables.error();
  auto kind = kind_of(db, *tables);
  if (!kind) return make_error(path + ": " + kind.error().message);
  if (*kind == StateFileKind::kGpud)
    return make_error(path + " is gpud's own store, not GPUd's state file");
  if (*kind != StateFileKind::kGpudGo && *kind != StateFileKind::kGpudInGpudGo)
    return make_error(path + " is not GPUd's state file: it has none of GPUd's tables");

  GpudImportReport report;
  report.source = path;
  const int64_t now_s = floor_unix_seconds(options.now);
  const int64_t keep = std::max<int64_t>(0, options.retention.count());
  const int64_t cutoff_s = now_s < std::numeric_limits<int64_t>::min() + keep
                               ? std::numeric_limits<int64_t>::min()
                               : now_s - keep;
  const int64_t future_s = now_s + std::chrono::seconds(kGpudImportFutureSlack).count();

  std::set<std::string> claimed;
  for (const std::string& component : options.components) {
    for (std::string_view schema : {kSchemaCurrent, kSchemaBeforeV05}) {
      const std::string table = gpud_events_table(component, schema);
      if (tables->count(table) == 0) continue;
      claimed.insert(table);
      TableReader reader{db, table, component, options, events, report};
      if (auto r = reader.run(cutoff_s, future_s); !r)
        report.table_errors.push_back(table + ": " + r.error().message);
    }
  }
  for (const std::string& t : *tables)
    if (is_gpud_events_table(t) && claimed.count(t) == 0)
      report.tables_without_component.push_back(t);

  auto id = read_machine_id(db, *tables);
  if (!id) return make_error(path + ": " + id.error().message);
  if (*id) {
    auto mine = metadata.get(kKeyMachineId);
    if (!mine) return make_error("read gpud's machine id: " + mine.error().message);
    if (*mine && !(*mine)->empty() && **mine != **id) report.previous_machine_id = **mine;
    if (!*mine || **mine != **id) {
      if (auto r = metadata.set(kKeyMachineId, **id); !r)
        return make_error("store GPUd's machine id: " + r.error().message);
    }
    report.machine_id = *id;
  }
  return report;
}

}  // namespace gpud::store
