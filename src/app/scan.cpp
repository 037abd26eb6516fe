// `gpud scan`: runs every supported component's check once, without the daemon, and reports.

#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "app/config_file.h"
#include "app/options.h"
#include "app/report.h"
#include "app/runtime.h"
#include "app/verbs.h"
#include "core/json.h"
#include "core/log.h"
#include "host/machine_info.h"
#include "host/os_info.h"
#include "kmsg/dispatcher.h"
#include "kmsg/reader.h"

namespace gpud::app {

namespace {

// Feeds the saved logs (or, without any, the /dev/kmsg ring when readable) through the components'
// kernel-log rules into the scan's in-memory store.
Result<void> scan_kernel_log(const Config& config, const host::HostFs& fs,
                             kmsg::KernelLogDispatcher& dispatcher) {
  if (config.kernel_logs.empty()) {
    kmsg::ParseOptions parse;
    parse.boot_time = host::read_boot_time(fs);
    if (!parse.boot_time) parse.boot_time = kmsg::estimate_boot_time();
    const std::string& path = config.kmsg_path;
    auto r = kmsg::read_kmsg_ring(path, parse,
                                  [&](const kmsg::KmsgRecord& rec) { dispatcher.feed(rec); });
    if (!r) logger("scan")->info("kernel log not read: {}", r.error().message);
    return {};
  }
  const TimePoint now = Clock::now();
  for (const std::string& path : config.kernel_logs) {
    auto cb = [&](const kmsg::KmsgRecordView& rec) { dispatcher.feed(rec, now); };
    kmsg::ReadOptions opts;
    opts.want_line = [&](std::string_view raw) { return dispatcher.wants(raw); };
    auto r =
        path == "-" ? kmsg::read_saved_log(0, cb, opts) : kmsg::read_saved_log_file(path, cb, opts);
    if (!r) return make_error("--kernel-log " + path + ": " + r.error().message);
    logger("scan")->info("{}: {} lines, {} kernel-log events so far", path, r->lines,
                         dispatcher.stored());
  }
  return {};
}

}  // namespace

void add_scan(CLI::App& app, int* exit_code) {
  auto flags = std::make_shared<RunFlags>();
  auto json = std::make_shared<bool>(false);
  auto* cmd =
      app.add_subcommand("scan", "Check every component once without the daemon and report");
  cmd->alias("check");
  add_component_flags(*cmd, *flags);
  cmd->add_flag("--json", *json, "Print a JSON document instead of the report");
  // kernel log
  cmd->add_option("--kernel-log", flags->config.kernel_logs,
                  "Scan this saved kernel log (dmesg, dmesg -T, journalctl -k, kern.log, raw "
                  "/dev/kmsg; repeatable; - for stdin) instead of /dev/kmsg");
  cmd->add_option("--log-level,-l", flags->config.log_level, "debug, info, warn or error")
      ->capture_default_str();
  auto config_file = std::make_shared<std::string>();
  add_config_option(*cmd, *config_file);
  cmd->callback([cmd, flags, json, config_file, exit_code] {
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
    if (auto r = scan_kernel_log(flags->config, fs, *rt.dispatcher); !r) {
      std::cerr << "✘ " << r.error().message << "\n";
      *exit_code = kExitUsage;
      return;
    }
    nlohmann::json info = host::collect_machine_info(fs);
    rt.nvidia->fill_machine_info(info);

    std::vector<ScanEntry> entries;
    for (Component* c : rt.registry.supported()) {
      ScanEntry e;
      e.component = std::string(c->name());
      e.result = c->check();
      auto ev = c->events(TimePoint::min(), Clock::now());
      if (ev) e.events = std::move(*ev);
      entries.push_back(std::move(e));
    }
    bool all_healthy = true;
    for (const auto& e : entries)
      if (e.result.health() != Health::kHealthy) all_healthy = false;

    if (*json) {
      std::cout << scan_json(info, entries).dump(2) << "\n";
    } else {
      std::cout << scan_text(info, entries);
    }
    *exit_code = all_healthy ? kExitOk : kExitUnhealthy;
  });
}

}  // namespace gpud::app
