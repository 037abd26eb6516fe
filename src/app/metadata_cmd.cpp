// `gpud metadata`: the state database's key/values and, with --reboot-history, the reboots the os
// component recorded; --set-key/--set-value writes one key (GPUd's verb).
#include <filesystem>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "app/options.h"
#include "app/verbs.h"
#include "core/time_util.h"
#include "store/database.h"
#include "store/event_store.h"
#include "store/metadata.h"

namespace gpud::app {

namespace {

// "3 days ago", "5 minutes ago": how long before now `t` was, in its largest whole unit.
std::string age(TimePoint t, TimePoint now) {
  using namespace std::chrono;
  const int64_t s = duration_cast<seconds>(now - t).count();
  if (s < 0) return "in the future";
  for (auto [unit, name] : {std::pair<int64_t, const char*>{86400, "day"},
                            std::pair<int64_t, const char*>{3600, "hour"},
                            std::pair<int64_t, const char*>{60, "minute"}})
    if (s >= unit) {
      const int64_t n = s / unit;
      return std::to_string(n) + " " + name + (n == 1 ? "" : "s") + " ago";
    }
  return std::to_string(s) + " seconds ago";
}

// Keys gpud manages itself: a hand-written value would break the store or an acknowledgement.
bool managed_key(const std::string& key) {
  return key == store::kKeySchemaVersion || key.starts_with(store::kKeyKernelLogWatermarkPrefix);
}

}  // namespace

void add_metadata(CLI::App& app, int* exit_code) {
  struct Options {
    std::string data_dir;
    std::string log_level = "info";
    std::string output_format = "plain";
    bool reboot_history = false;
    std::string set_key;
    std::string set_value;
  };
  auto o = std::make_shared<Options>();
  auto* cmd = app.add_subcommand(
      "metadata", "Print the state database's metadata (and reboot history); set a key");
  cmd->add_option("--data-dir", o->data_dir,
                  "State directory (default /var/lib/gpud as root, ~/.gpud otherwise)");
  cmd->add_option("--log-level,-l", o->log_level, "debug, info, warn or error")
      ->capture_default_str();
  cmd->add_option("--output-format", o->output_format, "plain or json")
      ->capture_default_str()
      ->check(CLI::IsMember({"plain", "json"}));
  cmd->add_flag("--reboot-history", o->reboot_history,
                "Also list the reboots the os component recorded");
  cmd->add_option("--set-key", o->set_key, "Metadata key to set (with --set-value)");
  cmd->add_option("--set-value", o->set_value, "Value for --set-key");
  cmd->callback([o, exit_code] {
    auto fail = [exit_code](const std::string& msg) {
      std::cerr << "✘ " << msg << "\n";
      *exit_code = kExitUsage;
    };
    if (auto r = setup_logging(o->log_level, ""); !r) return fail(r.error().message);
    if (o->set_key.empty() != o->set_value.empty())
      return fail("--set-key and --set-value go together");
    if (managed_key(o->set_key))
      return fail("metadata key \"" + o->set_key + "\" is gpud's own and cannot be set by hand");
    const std::string dir = o->data_dir.empty() ? default_data_dir() : o->data_dir;
    const std::string path = dir + "/" + store::kStateFileName;
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) return fail("no state database at " + path);
    auto db = store::Database::open(path);
    if (!db) return fail(db.error().message);
    store::Metadata meta(**db);
    nlohmann::json updated;
    if (!o->set_key.empty()) {
      if (auto r = meta.set(o->set_key, o->set_value); !r)
        return fail("cannot set " + o->set_key + ": " + r.error().message);
      updated = {{"key", o->set_key}, {"value", o->set_value}};
    }
    auto all = meta.all();
    if (!all) return fail("cannot read the metadata: " + all.error().message);
    nlohmann::json history = nlohmann::json::array();
    if (o->reboot_history) {
      store::EventStore events(**db);
      auto os = events.query("os", TimePoint::min(), TimePoint::max());
      if (!os) return fail("cannot read the reboot history: " + os.error().message);
      const TimePoint now = Clock::now();
      for (const Event& e : *os)
        if (e.name == "reboot")
          history.push_back({{"time_utc", format_rfc3339(e.time)},
                             {"age", age(e.time, now)},
                             {"message", e.message}});
    }
    if (o->output_format == "json") {
      nlohmann::json doc = {{"metadata", *all}};
      if (o->reboot_history) doc["reboot_history"] = history;
      if (!updated.is_null()) doc["updated"] = updated;
      std::cout << doc.dump(2) << "\n";
    } else {
      for (const auto& [k, v] : *all) std::cout << k << ": " << v << "\n";
      if (o->reboot_history) {
        std::cout << "\nreboot history (" << history.size() << "):\n";
        for (const auto& h : history)
          std::cout << "  " << h["time_utc"].get<std::string>() << "  "
                    << h["age"].get<std::string>() << "  " << h["message"].get<std::string>()
                    << "\n";
      }
      if (!updated.is_null()) std::cout << "✔ successfully updated metadata\n";
    }
    *exit_code = kExitOk;
  });
}

}  // namespace gpud::app
