// `gpud scan`: runs every supported component's check once, without the daemon, and reports.

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "app/config_file.h"
#include "app/options.h"
#include "app/report.h"
#include "app/runtime.h"
#include "app/truncation_guard.h"
#include "app/verbs.h"
#include "components/registry.h"
#include "core/json.h"
#include "core/log.h"
#include "core/time_util.h"
#include "host/machine_info.h"
#include "host/os_info.h"
#include "kmsg/event_pipeline.h"
#include "kmsg/reader.h"

namespace gpud::app {

namespace {

// Feeds the saved logs (or, without any, the /dev/kmsg ring when readable) through the components'
// kernel-log rules into the scan's in-memory store.
Result<void> scan_kernel_log(const Config& config, const host::HostFs& fs,
                             std::optional<TimePoint> saved_log_boot_time,
                             kmsg::EventPipeline& pipeline) {
  pipeline.keep_occurrences();
  if (config.kernel_logs.empty()) {
    kmsg::ParseOptions parse;
    parse.boot_time = host::read_boot_time(fs);
    if (!parse.boot_time) parse.boot_time = kmsg::estimate_boot_time();
    const std::string& path = config.kmsg_path;
    auto r =
        kmsg::read_kmsg_ring(path, parse, [&](const kmsg::KmsgRecord& rec) { pipeline.feed(rec); });
    if (!r) logger("scan")->info("kernel log not read: {}", r.error().message);
    return {};
  }
  const TimePoint now = Clock::now();
  for (const std::string& path : config.kernel_logs) {
    auto cb = [&](const kmsg::KmsgRecordView& rec) { pipeline.feed(rec, now); };
    kmsg::ReadOptions opts;
    // A saved log's "[  1005.03]" stamps are wall-clock times only with its boot's time.
    opts.parse.boot_time = saved_log_boot_time;
    opts.parse.now = now;
    opts.want_keywords = pipeline.literals();
    opts.want_every_line = [&] { return pipeline.pending(); };
    opts.threads = 2;
    TruncationGuard guard(path);
    auto r =
        path == "-" ? kmsg::read_saved_log(0, cb, opts) : kmsg::read_saved_log_file(path, cb, opts);
    if (!r) return make_error("--kernel-log " + path + ": " + r.error().message);
    logger("scan")->info("{}: {} lines, {} kernel-log events so far", path, r->lines,
                         pipeline.stored());
  }
  return {};
}

// The zone of a saved log's dmesg -T and syslog dates: a zoneinfo name ("Europe/Berlin", "UTC")
// or a POSIX TZ string ("CET-1CEST,M3.5.0,M10.5.0/3"). glibc reads an unknown name as UTC without
// a word, so a name must exist under the zoneinfo directory.
Result<void> use_log_zone(const std::string& zone) {
  const bool posix = zone.find_first_of("0123456789") != std::string::npos &&
                     zone.find('/') == std::string::npos &&
                     std::isalpha(static_cast<unsigned char>(zone[0])) != 0;
  if (zone.empty() || zone.find("..") != std::string::npos || zone[0] == '/')
    return make_error("--kernel-log-tz \"" + zone + "\": not a time zone");
  if (!posix && zone != "UTC") {
    const char* dir = std::getenv("TZDIR");
    const std::string path =
        std::string(dir != nullptr && *dir != '\0' ? dir : "/usr/share/zoneinfo") + "/" + zone;
    if (!std::filesystem::is_regular_file(path))
      return make_error("--kernel-log-tz \"" + zone + "\": unknown time zone (no " + path +
                        "; install tzdata, or give a POSIX TZ string such as EST5EDT)");
  }
  // Set before any thread starts; every local date this process reads is in this zone.
  ::setenv("TZ", zone.c_str(), 1);
  ::tzset();
  return {};
}

}  // namespace

void add_scan(CLI::App& app, int* exit_code) {
  auto flags = std::make_shared<RunFlags>();
  auto json = std::make_shared<bool>(false);
  auto* cmd =
      app.add_subcommand("scan", "Check every component once without the daemon and report");
  cmd->alias("check");
  cmd->alias("s");
  add_component_flags(*cmd, *flags);
  cmd->add_option("--events-retention-period", flags->events_retention,
                  "GPUd's flag, checked as for run; scan keeps no events, so it changes nothing")
      ->capture_default_str();
  add_gpud_flags(*cmd, kGpudScan, flags->gpud_flags_given);
  cmd->add_flag("--json", *json, "Print a JSON document instead of the report");
  // kernel log
  cmd->add_option("--kernel-log", flags->config.kernel_logs,
                  "Scan this saved kernel log (dmesg, dmesg -T, journalctl -k, kern.log, raw "
                  "/dev/kmsg; repeatable; - for stdin) instead of /dev/kmsg");
  auto boot_time = std::make_shared<std::string>();
  cmd->add_option("--boot-time", *boot_time,
                  "When the saved log's machine booted (RFC 3339 or Unix seconds): its [ 1005.03] "
                  "stamps become wall-clock times; without it they read \"boot + 1005.03 s\"");
  auto log_zone = std::make_shared<std::string>();
  cmd->add_option("--kernel-log-tz", *log_zone,
                  "Time zone of the saved log's dmesg -T and syslog dates (zoneinfo name or POSIX "
                  "TZ; default: this machine's zone)");
  cmd->add_option("--log-level,-l", flags->config.log_level, "debug, info, warn or error")
      ->capture_default_str();
  auto config_file = std::make_shared<std::string>();
  add_config_option(*cmd, *config_file);
  cmd->callback([cmd, flags, json, config_file, boot_time, log_zone, exit_code] {
    if (auto r = apply_config_file(*cmd, *config_file); !r) {
      std::cerr << "✘ " << r.error().message << "\n";
      *exit_code = kExitUsage;
      return;
    }
    if (auto r = setup_logging(flags->config.log_level, ""); !r) {
      std::cerr << "✘ " << r.error().message << "\n";
      *exit_code = kExitUsage;
      return;
    }
    for (const auto& line : gpud_flag_warnings(flags->gpud_flags_given))
      logger("scan")->warn("{}", line);
    std::optional<TimePoint> saved_log_boot_time;
    if (!boot_time->empty() || !log_zone->empty()) {
      std::string problem;
      if (flags->config.kernel_logs.empty())
        problem = "--boot-time and --kernel-log-tz describe a saved log: give --kernel-log FILE";
      if (problem.empty() && !boot_time->empty()) {
        saved_log_boot_time = parse_time(*boot_time);
        if (!saved_log_boot_time)
          problem = "--boot-time \"" + *boot_time +
                    "\": not a time (RFC 3339 such as 2026-11-30T08:00:00Z, or Unix seconds)";
      }
      if (problem.empty() && !log_zone->empty())
        if (auto r = use_log_zone(*log_zone); !r) problem = r.error().message;
      if (!problem.empty()) {
        std::cerr << "✘ " << problem << "\n";
        *exit_code = kExitUsage;
        return;
      }
    }
    flags->config.data_dir = "-";  // scan keeps nothing on disk
    if (auto r = finalize(*flags); !r) {
      std::cerr << "✘ " << r.error().message << "\n";
      *exit_code = kExitUsage;
      return;
    }
    auto runtime = build_runtime(flags->config, RuntimeMode::kScan);
    if (!runtime) {
      std::cerr << "✘ " << runtime.error().message << "\n";
      *exit_code = kExitUsage;
      return;
    }
    Runtime& rt = **runtime;
    host::HostFs fs(flags->config.host_root);
    if (auto r = scan_kernel_log(flags->config, fs, saved_log_boot_time, *rt.pipeline); !r) {
      std::cerr << "✘ " << r.error().message << "\n";
      *exit_code = kExitUsage;
      return;
    }
    nlohmann::json info = host::collect_machine_info(fs);
    rt.nvidia->fill_machine_info(info);

    std::vector<ScanEntry> entries;
    // The container runtimes first: the GPU processes are traced to what they list. The cpu check
    // last: its first usage spans at least 100 ms from its first sample (taken when it was made),
    // which the kernel log and the other checks then fill instead of a sleep.
    std::vector<Component*> order = components::check_order(rt.registry.supported());
    std::stable_partition(order.begin(), order.end(),
                          [](const Component* c) { return c->name() != "cpu"; });
    for (Component* c : order) {
      ScanEntry e;
      e.component = std::string(c->name());
      e.result = c->check();
      // Every event, a future-dated one too: the text and --json list the same.
      auto ev = c->events(TimePoint::min(), TimePoint::max());
      if (ev) e.events = std::move(*ev);
      entries.push_back(std::move(e));
    }
    // Reported in name order, as before.
    std::sort(entries.begin(), entries.end(),
              [](const ScanEntry& a, const ScanEntry& b) { return a.component < b.component; });
    bool all_healthy = true;
    for (const auto& e : entries)
      if (e.result.health() != Health::kHealthy) all_healthy = false;

    if (*json) {
      std::cout << scan_json(info, entries, rt.pipeline->occurrences()).dump(2) << "\n";
    } else {
      std::cout << scan_text(info, entries, rt.pipeline->occurrences());
    }
    // Out before the runtime's shutdown logs anything (a driver call still stuck): with stdout and
    // stderr in one pipe, a buffered report would otherwise be cut by that line.
    std::cout.flush();
    *exit_code = all_healthy ? kExitOk : kExitUnhealthy;
  });
}

}  // namespace gpud::app
