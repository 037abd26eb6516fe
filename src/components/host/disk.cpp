#include "components/host/disk.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cerrno>
#include <map>

#include "components/snapshot_metric.h"
#include "core/log.h"
#include "core/reboot_rules.h"
#include "host/bytes.h"
#include "host/mountinfo.h"
#include "host/nfs_probe.h"

namespace gpud::components {

using host::human_bytes;

namespace {

void add_usage(nlohmann::json& j, const host::FsUsage& u) {
  j["total_bytes"] = u.total_bytes;
  j["free_bytes"] = u.free_bytes;
  j["available_bytes"] = u.available_bytes;
  j["used_bytes"] = u.used_bytes;
  j["used_percent"] = u.used_percent();
}

}  // namespace

nlohmann::json to_json(const DiskSnapshot& s) {
  nlohmann::json mounts = nlohmann::json::array();
  for (const TrackedMount& m : s.mounts) {
    nlohmann::json j;
    j["mount_point"] = m.mount_point;
    j["mounted"] = m.mounted;
    j["device"] = m.device;
    j["fs_type"] = m.fs_type;
    j["major_minor"] = m.major_minor;
    if (m.usage) add_usage(j, *m.usage);
    if (!m.error.empty()) j["error"] = m.error;
    mounts.push_back(std::move(j));
  }
  nlohmann::json network = nlohmann::json::array();
  for (const NetworkMount& m : s.network_mounts) {
    nlohmann::json j{{"mount_point", m.mount_point}, {"source", m.source}, {"fs_type", m.fs_type}};
    if (m.usage) add_usage(j, *m.usage);
    if (!m.error.empty()) j["error"] = m.error;
    if (m.timed_out) j["timeouts_in_a_row"] = m.timeouts_in_a_row;
    network.push_back(std::move(j));
  }
  nlohmann::json out;
  out["mounts"] = std::move(mounts);
  if (!s.network_mounts.empty()) out["network_mounts"] = std::move(network);
  out["mount_table_read"] = s.mount_table_read;
  if (!s.mount_table_error.empty()) out["mount_table_error"] = s.mount_table_error;
  return out;
}

std::vector<std::string> tracked_mount_points(const std::vector<std::string>& configured) {
  std::vector<std::string> out{"/"};
  for (std::string mp : configured) {
    while (mp.size() > 1 && mp.back() == '/') mp.pop_back();
    if (mp.empty() || mp.front() != '/') continue;
    if (std::find(out.begin(), out.end(), mp) == out.end()) out.push_back(std::move(mp));
  }
  return out;
}

CheckResult evaluate_disk(const DiskSnapshot& s) {
  std::vector<std::string> problems;
  std::vector<std::string> errors;
  std::vector<std::string> usages;
  for (const TrackedMount& m : s.mounts) {
    if (s.mount_table_read && !m.mounted) {
      problems.push_back(fmt::format("mount point {} is not mounted", m.mount_point));
      continue;
    }
    if (!m.usage) {
      problems.push_back(fmt::format("cannot stat {}: {}", m.mount_point, m.error));
      errors.push_back(m.error);
      continue;
    }
    if (m.mount_point == "/" && m.usage->available_bytes < kRootMinAvailableBytes) {
      problems.push_back(fmt::format("only {} free on / (less than {})",
                                     human_bytes(m.usage->available_bytes),
                                     human_bytes(kRootMinAvailableBytes)));
    }
    usages.push_back(fmt::format("{} {:.1f}% used, {} free", m.mount_point, m.usage->used_percent(),
                                 human_bytes(m.usage->available_bytes)));
  }
  for (const NetworkMount& m : s.network_mounts)
    if (m.timed_out && m.timeouts_in_a_row >= kNetworkMountTimeoutChecks)
      problems.push_back(fmt::format(
          "{} stat timed out (possible connection issue) has failed continuously for {} checks",
          m.mount_point, m.timeouts_in_a_row));

  Health health = problems.empty() ? Health::kHealthy : Health::kDegraded;
  std::string reason;
  if (!problems.empty()) {
    for (const auto& p : problems) reason += (reason.empty() ? "" : "; ") + p;
  } else {
    reason = "disk usage ";
    for (size_t i = 0; i < usages.size(); ++i) reason += (i ? "; " : "") + usages[i];
    if (usages.empty()) reason = "no tracked mount points";
  }
  CheckResult r = single_state("disk", health, std::move(reason), std::nullopt, to_json(s));
  for (const auto& e : errors) r.states[0].error += (r.states[0].error.empty() ? "" : "; ") + e;

  std::string& d = r.detail;
  if (!s.mount_table_read) d += "mount table unreadable: " + s.mount_table_error + "\n";
  for (const TrackedMount& m : s.mounts) {
    d += m.mount_point + ":";
    if (s.mount_table_read && !m.mounted) {
      d += " not mounted\n";
      continue;
    }
    if (!m.fs_type.empty()) d += " " + m.fs_type + " on " + m.device;
    if (m.usage) {
      d += fmt::format(" total {}, used {} ({:.1f}%), available {}",
                       human_bytes(m.usage->total_bytes), human_bytes(m.usage->used_bytes),
                       m.usage->used_percent(), human_bytes(m.usage->available_bytes));
    } else {
      d += " error: " + m.error;
    }
    d += "\n";
  }
  for (const NetworkMount& m : s.network_mounts) {
    d += fmt::format("{}: {} on {}", m.mount_point, m.fs_type, m.source);
    if (m.usage)
      d += fmt::format(" total {}, used {} ({:.1f}%), available {}",
                       human_bytes(m.usage->total_bytes), human_bytes(m.usage->used_bytes),
                       m.usage->used_percent(), human_bytes(m.usage->available_bytes));
    else
      d += " error: " + m.error +
           (m.timed_out ? fmt::format(" ({} check(s) in a row)", m.timeouts_in_a_row) : "");
    d += "\n";
  }
  return r;
}

namespace {

// One series per tracked mount point whose usage was read, labelled with it: a mount point that
// went away or could not be statted has none.
void per_mount(const DiskSnapshot& s, MetricSeries& out, double (*read)(const host::FsUsage&)) {
  for (const TrackedMount& m : s.mounts)
    if (m.usage) out.emplace_back(Labels{{"mount_point", m.mount_point}}, read(*m.usage));
}

constexpr SnapshotMetric<DiskSnapshot> kMetrics[] = {
    {.name = "disk_total_bytes",
     .help = "Size of the filesystem at mount_point in bytes",
     .series =
         [](const DiskSnapshot& s, MetricSeries& out) {
           per_mount(s, out,
                     [](const host::FsUsage& u) { return static_cast<double>(u.total_bytes); });
         }},
    {.name = "disk_free_bytes",
     .help = "Bytes available to unprivileged users on the filesystem at mount_point",
     .series =
         [](const DiskSnapshot& s, MetricSeries& out) {
           per_mount(s, out,
                     [](const host::FsUsage& u) { return static_cast<double>(u.available_bytes); });
         }},
    {.name = "disk_used_bytes",
     .help = "Bytes in use on the filesystem at mount_point",
     .series =
         [](const DiskSnapshot& s, MetricSeries& out) {
           per_mount(s, out,
                     [](const host::FsUsage& u) { return static_cast<double>(u.used_bytes); });
         }},
    {.name = "disk_used_percent",
     .help = "Used bytes in percent of used + available on the filesystem at mount_point",
     .series =
         [](const DiskSnapshot& s, MetricSeries& out) {
           per_mount(s, out, [](const host::FsUsage& u) { return u.used_percent(); });
         }},
};
static_assert(valid_metric_table(kMetrics));

}  // namespace

DiskComponent::DiskComponent(const ComponentContext& ctx)
    : Component(ctx),
      fs_(ctx.config->host_root),
      tracked_(tracked_mount_points(ctx.config->mount_points)),
      network_mounts_(!ctx.config->nfs_checkers.empty()) {
  describe_metrics(ctx.metrics, kMetrics);
}

DiskSnapshot DiskComponent::collect() {
  DiskSnapshot s;
  host::MountTable table;
  auto text = fs_.read("/proc/self/mountinfo");
  if (text) {
    table = host::parse_mountinfo(*text);
  } else {
    s.mount_table_read = false;
    s.mount_table_error = text.error().message;
    if (!warned_mount_table_.exchange(true))
      logger("disk")->warn(
          "cannot read the mount table ({}); not checking whether mount points are "
          "mounted",
          text.error().message);
  }
  for (const std::string& mp : tracked_) {
    TrackedMount m;
    m.mount_point = mp;
    if (s.mount_table_read) {
      const host::MountInfo* info = host::find_mount(table, mp);
      if (info == nullptr) {
        s.mounts.push_back(std::move(m));
        continue;  // statvfs would report the parent filesystem
      }
      m.mounted = true;
      m.device = info->source;
      m.fs_type = info->fs_type;
      m.major_minor = fmt::format("{}:{}", info->major, info->minor);
    }
    auto usage = host::stat_fs_usage(fs_, mp);
    if (usage)
      m.usage = *usage;
    else
      m.error = usage.error().message;
    s.mounts.push_back(std::move(m));
  }
  if (network_mounts_ && s.mount_table_read) collect_network_mounts(table, s);
  return s;
}

void DiskComponent::collect_network_mounts(const host::MountTable& table, DiskSnapshot& s) {
  std::lock_guard lock(network_mu_);  // one check counts at a time
  std::map<std::string, int> timeouts;
  for (const host::MountInfo& info : table.mounts) {
    if (!host::network_fs_type(info.fs_type)) continue;
    const std::string& mp = info.mount_point;
    if (std::find(tracked_.begin(), tracked_.end(), mp) != tracked_.end()) continue;
    // A mount point mounted twice (stacked) is statted once, as its top mount.
    if (host::find_mount(table, mp) != &info) continue;
    NetworkMount m;
    m.mount_point = mp;
    m.source = info.source;
    m.fs_type = info.fs_type;
    auto usage = host::stat_fs_usage(fs_, mp);
    if (usage) {
      m.usage = *usage;
    } else {
      m.error = usage.error().message;
      m.timed_out = usage.error().code == ETIMEDOUT;
    }
    if (m.timed_out) {
      auto it = network_timeouts_.find(mp);
      m.timeouts_in_a_row = (it == network_timeouts_.end() ? 0 : it->second) + 1;
      timeouts[mp] = m.timeouts_in_a_row;
    }
    s.network_mounts.push_back(std::move(m));
  }
  network_timeouts_ = std::move(timeouts);
}

KernelLogVerdict evaluate_disk_events(const std::vector<Event>& events,
                                      const std::vector<TimePoint>& reboots,
                                      const std::vector<uint64_t>& counts) {
  std::vector<const Event*> all;
  for (const Event& e : events) all.push_back(&e);
  UnresolvedFailures failures = unresolved_failures(all, reboots, counts);
  KernelLogVerdict v;
  if (failures.reasons.empty()) return v;
  v.health = Health::kUnhealthy;
  v.reason = fmt::format("disk errors in the kernel log: {}", fmt::join(failures.reasons, "; "));
  v.actions =
      SuggestedActions{"disk errors found in the kernel log",
                       {aggregate_actions(failures.actions).value_or(RepairAction::kRebootSystem)}};
  return v;
}

CheckResult DiskComponent::check() {
  DiskSnapshot s = collect();
  publish_metrics(ctx().metrics, name(), kMetrics, &s);
  CheckResult r = evaluate_disk(s);
  const TimePoint since =
      ctx().scan_mode ? TimePoint{} : Clock::now() - std::chrono::hours(24 * 14);
  // Grouped on the name and split at reboots: memory bounded by the kinds of error.
  auto h = kernel_log_digest(ctx(), name(), since, {}, 1);
  if (!h)
    merge_verdict(r, unreadable_history(h.error()));
  else if (!h->digest.events.empty())
    merge_verdict(r, evaluate_disk_events(h->digest.events, h->reboots, h->digest.counts));
  return r;
}

kmsg::ComponentRules disk_kernel_log_rules() {
  kmsg::ComponentRules r;
  r.component = "disk";
  const std::string start(kmsg::kMessageStart);
  r.lines = {
      kmsg::pattern_rule({{"Disk failure on"}}, "raid_array_failure",
                         R"(md/raid.*: Disk failure on (\S+) detected, failing array)",
                         "RAID array has a disk failure ({})", "device"),
      kmsg::pattern_rule({{"filesystem read-only", "read-o"}}, "filesystem_read_only",
                         R"(^(?:.*?\(([^)]+)\): )?.*Remounting filesystem read-only)",
                         "filesystem remounted as read-only", "device"),
      kmsg::pattern_rule({{"available path", "e path"}}, "nvme_path_failure",
                         R"(block (nvme\S*): no available path - failing I/O)",
                         "NVMe path failure detected ({})", "device"),
      // "I/O 123 QID 4" before 6.5, "I/O tag 123 (007b) opcode 0x2 (Read) QID 4" since.
      kmsg::pattern_rule(
          {{"timeout, aborting"}, {"reset controller", "contro"}, {"disable controller", "contro"}},
          "nvme_controller_timeout",
          R"(nvme (nvme[0-9]+): I/O .* timeout, (?:aborting|reset controller|disable controller))",
          "NVMe controller timeout ({})", "device"),
      // nvme_log_error (5.18+): "I/O Cmd(0x2) ... I/O Error" or, with NVME_VERBOSE_ERRORS,
      // "Read(0x2) ... Unrecovered Read Error"; admin commands have no LBA and are left out.
      kmsg::pattern_rule(
          {{" blocks, "}}, "nvme_io_error",
          R"((nvme[0-9]+(?:c[0-9]+)?n[0-9]+): .*\(0x[0-9a-fA-F]+\) @ LBA [0-9]+, [0-9]+ blocks, .*\(sct 0x[0-9a-fA-F]+ / sc 0x[0-9a-fA-F]+\))",
          "NVMe I/O error ({})", "device"),
      kmsg::pattern_rule({{"after reset failure", "reset "}}, "nvme_device_disabled",
                         R"(nvme (nvme[0-9]+): Disabling device after reset failure)",
                         "NVMe device disabled after reset failure ({})", "device"),
      kmsg::pattern_rule({{"beyond end of device"}}, "beyond_end_of_device",
                         R"(attempt to access beyond end of device)",
                         "I/O attempted beyond end of device"),
      kmsg::pattern_rule({{"Buffer I/O error"}}, "buffer_io_error",
                         R"(Buffer I/O error on dev ([^ ,]+), logical block [0-9]+)",
                         "buffer I/O error on device ({})", "device"),
      kmsg::pattern_rule({{"writing superblock", "superb"}}, "superblock_write_error",
                         R"(I/O error while writing superblock)", "superblock write error"),
      // drivers/nvme/host/pci.c nvme_warn_reset (4.13+): "controller is down; will reset:
      // CSTS=..."; core.c (4.15-6.x): "resetting controller due to AER" (dev_warn on the
      // controller: "nvme nvme0: ").
      kmsg::pattern_rule(
          {{"will reset: CSTS", "set: CSTS"}, {"resetting controller due to", "ler due to"}},
          "nvme_controller_reset",
          start +
              R"(nvme (nvme[0-9]+): (?:controller is down; will reset: CSTS=|resetting controller due to ))",
          "NVMe controller reset ({})", "device"),
      // fs/xfs/xfs_fsops.c xfs_do_force_shutdown through xfs_message.c's "XFS (%s): ": 3.x-5.16
      // "... Detected. Shutting down filesystem" / "Corruption of in-memory data detected.
      // Shutting down filesystem", 5.17+ "%s (0x%x) detected at %pS (%s:%d).  Shutting down
      // filesystem.".
      kmsg::pattern_rule({{"Shutting down filesystem", "ng down"}}, "xfs_filesystem_shutdown",
                         start + R"(XFS \(([^)\s]+)\): .*[Dd]etected.*Shutting down filesystem)",
                         "XFS filesystem shut down ({})", "device"),
      // fs/btrfs (super.c __btrfs_handle_fs_error, messages.c since 6.2): "forced readonly"
      // after an error, as "BTRFS info (device %s[ state %s]): ".
      kmsg::pattern_rule({{"forced readonly"}}, "btrfs_forced_readonly",
                         start + R"(BTRFS info \(device ([^)\s]+)[^)]*\): forced readonly)",
                         "BTRFS filesystem forced read-only ({})", "device"),
      // block/blk-core.c: 3.x "end_request: ", 4.x "blk_update_request: ", 4.17-5.x
      // "print_req_error: " or the caller, 5.16+ nothing before "%s error, dev %s, sector %llu";
      // the error is one of blk_errors[]'s names.
      kmsg::pattern_rule(
          {{", sector "}}, "block_io_error",
          start +
              R"((?:(?:end_request|blk_update_request|print_req_error): )?(?:I/O|critical medium|critical target|timeout|recoverable transport|critical nexus|critical space allocation|protection|operation not supported) error, dev ([^,\s]+), sector [0-9]+)",
          "block device I/O error ({})", "device"),
      // fs/ext4/super.c (3.x-6.x) through KERN_CRIT printk: __ext4_error "EXT4-fs error (device
      // %s): %s:%d: comm %s: ", __ext4_error_inode and __ext4_error_file "...: inode #%lu:
      // [block %llu: ]comm %s: [path %s: ]", __ext4_std_error "EXT4-fs error (device %s) in
      // %s:%d: %s", __ext4_abort (before 5.x) "EXT4-fs error (device %s): %s:%d: ". Its
      // "Remounting filesystem read-only" (ext4_handle_error) is filesystem_read_only's.
      kmsg::pattern_rule({{"EXT4-fs error (device ", "fs error"}}, "ext4_error",
                         start + R"(EXT4-fs error \(device ([^)\s]+)\)(?::| in) \w+:\d+)",
                         "ext4 filesystem error ({})", "device"),
  };
  return r;
}

}  // namespace gpud::components
