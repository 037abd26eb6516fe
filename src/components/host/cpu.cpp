#include "components/host/cpu.h"

#include <fmt/format.h>
#include <re2/re2.h>

#include <thread>

#include "components/kernel_log_support.h"
#include "components/snapshot_metric.h"
#include "core/parse_number.h"
#include "kmsg/parser.h"

namespace gpud::components {

nlohmann::json to_json(const CpuSnapshot& s) {
  nlohmann::json j;
  j["logical_cores"] = s.logical_cores;
  j["used_percent"] = s.used_percent ? nlohmann::json(*s.used_percent) : nlohmann::json(nullptr);
  j["load_avg_1m"] = s.load.one;
  j["load_avg_5m"] = s.load.five;
  j["load_avg_15m"] = s.load.fifteen;
  j["runnable_tasks"] = s.load.runnable;
  j["total_tasks"] = s.load.tasks;
  return j;
}

CheckResult evaluate_cpu(const Result<CpuSnapshot>& snapshot) {
  if (!snapshot) {
    CheckResult r = single_state("cpu", Health::kUnhealthy, "failed to collect cpu stats");
    r.states[0].error = snapshot.error().message;
    r.detail = "error: " + snapshot.error().message + "\n";
    return r;
  }
  const CpuSnapshot& s = *snapshot;
  std::string usage = s.used_percent ? fmt::format("{:.1f}%", *s.used_percent) : "n/a";
  std::string cores =
      s.logical_cores > 0 ? fmt::format("{} cores", s.logical_cores) : "cores unknown";
  std::string reason = fmt::format("cpu usage {}, load average {:.2f} {:.2f} {:.2f} ({})", usage,
                                   s.load.one, s.load.five, s.load.fifteen, cores);
  CheckResult r =
      single_state("cpu", Health::kHealthy, std::move(reason), std::nullopt, to_json(s));
  r.detail =
      fmt::format("logical cores: {}\nusage: {}\nload average (1m 5m 15m): {:.2f} {:.2f} {:.2f}\n",
                  s.logical_cores > 0 ? std::to_string(s.logical_cores) : "unknown", usage,
                  s.load.one, s.load.five, s.load.fifteen);
  return r;
}

namespace {

constexpr SnapshotMetric<CpuSnapshot> kMetrics[] = {
    {.name = "cpu_used_percent",
     .help = "CPU usage in percent since the previous check",
     .value = [](const CpuSnapshot& s) { return s.used_percent; }},
    {.name = "cpu_load_average",
     .help = "System load average over load_duration (1m0s, 5m0s, 15m0s)",
     .series =
         [](const CpuSnapshot& s, MetricSeries& out) {
           out.emplace_back(Labels{{"load_duration", "1m0s"}}, s.load.one);
           out.emplace_back(Labels{{"load_duration", "5m0s"}}, s.load.five);
           out.emplace_back(Labels{{"load_duration", "15m0s"}}, s.load.fifteen);
         }},
};
static_assert(valid_metric_table(kMetrics));

}  // namespace

CpuComponent::CpuComponent(const ComponentContext& ctx)
    : Component(ctx), fs_(ctx.config->host_root) {
  describe_metrics(ctx.metrics, kMetrics);
  // The first sample now: whatever runs before the first check (`gpud scan` reads a kernel log)
  // counts towards the wait between the first two samples.
  if (auto stat = read_stat(); stat) {
    prev_ = stat->aggregate;
    prev_at_ = std::chrono::steady_clock::now();
  }
}

Result<host::ProcStat> CpuComponent::read_stat() const {
  auto text = fs_.read("/proc/stat");
  if (!text) return text.error();
  return host::parse_proc_stat(*text);
}

Result<CpuSnapshot> CpuComponent::collect() {
  std::lock_guard lock(mu_);
  auto stat = read_stat();
  if (!stat) return stat.error();
  if (!prev_) {
    prev_ = stat->aggregate;
    prev_at_ = std::chrono::steady_clock::now();
  }
  if (!checked_) {
    // The very first check reports a usage over at least first_sample_delay_ since the first
    // sample (taken when the component was made, or just now).
    checked_ = true;
    const auto since = std::chrono::steady_clock::now() - prev_at_;
    if (since < first_sample_delay_) {
      std::this_thread::sleep_for(first_sample_delay_ - since);
      stat = read_stat();
      if (!stat) return stat.error();
    }
  }
  CpuSnapshot s;
  s.logical_cores = stat->logical_cores;
  s.used_percent = host::cpu_usage_percent(*prev_, stat->aggregate);
  prev_ = stat->aggregate;

  auto load_text = fs_.read("/proc/loadavg");
  if (!load_text) return load_text.error();
  auto load = host::parse_loadavg(*load_text);
  if (!load) return load.error();
  s.load = *load;
  return s;
}

CheckResult CpuComponent::check() {
  auto snapshot = collect();
  publish_metrics(ctx().metrics, name(), kMetrics, snapshot);
  CheckResult r = evaluate_cpu(snapshot);
  // Hung tasks and soft lockups from the kernel log are listed; health is unchanged (as GPUd).
  append_kernel_log_events(r, ctx(), name());
  return r;
}

namespace {

// arch/x86/kernel/cpu/mce/core.c print_mce (mcheck/mce.c before 4.19; "mce: " since 4.x):
// "[Hardware Error]: CPU %d: Machine Check%s: %Lx Bank %d: %016Lx", " Exception" while MCIP is
// set. The bank status says whether the error was corrected: bit 61 (UC) set is uncorrected.
std::optional<kmsg::Match> match_machine_check(std::string_view s) {
  static const RE2 kRe(
      std::string(kmsg::kMessageStart) +
      R"((?:mce: )?\[Hardware Error\]: CPU (\d+): Machine Check(?: Exception)?: [0-9a-fA-F]+ Bank (\d+): ([0-9a-fA-F]{1,16})\b)");
  int cpu = 0, bank = 0;
  std::string status;
  if (!RE2::PartialMatch(re2::StringPiece(s.data(), s.size()), kRe, &cpu, &bank, &status))
    return std::nullopt;
  const auto bits = parse_integer<uint64_t>(status, 16);
  if (!bits) return std::nullopt;
  const bool uncorrected = (*bits >> 61) & 1;
  kmsg::Match m;
  m.name = "cpu_machine_check";
  m.type = uncorrected ? EventType::kCritical : EventType::kWarning;
  m.message = fmt::format("{} machine check on CPU {}, bank {} (status 0x{:016x})",
                          uncorrected ? "uncorrected" : "corrected", cpu, bank, *bits);
  m.extra_info = {{"cpu", cpu},
                  {"bank", bank},
                  {"status", fmt::format("0x{:016x}", *bits)},
                  {"uncorrected", uncorrected},
                  {"log_line", kmsg::log_line_excerpt(s)}};
  return m;
}

}  // namespace

kmsg::ComponentRules cpu_kernel_log_rules() {
  kmsg::ComponentRules r;
  r.component = "cpu";
  r.lines = {
      // kernel/hung_task.c (2.6.3x-6.x): "INFO: task %s:%d blocked for more than %ld seconds.";
      // the comm may hold spaces and colons, the pid is the last ":N" before " blocked".
      kmsg::pattern_rule({{"blocked for more than"}}, "cpu_blocked_too_long",
                         std::string(kmsg::kMessageStart) +
                             R"(INFO: task (.+:\d+) blocked for more than \d+ seconds)",
                         "CPU task blocked for more than 120 seconds ({})", "task"),
      kmsg::pattern_rule({{"soft lockup", "lockup"}}, "cpu_soft_lockup",
                         R"(soft lockup - CPU#\d+ stuck for \d+s! \[(.+:\d+)\])",
                         "CPU soft lockup detected, not reporting for potentially too long ({})",
                         "task"),
      // kernel/rcu/tree_stall.h (tree.c before 5.1; "rcu: " since 4.20): "INFO: %s detected
      // stalls on CPUs/tasks:", "INFO: %s self-detected stall on CPU"; tree_exp.h "INFO: %s
      // detected expedited stalls on CPUs/tasks: {".
      kmsg::pattern_rule(
          {{"stalls on CPUs"}, {"self-detected stall"}}, "cpu_rcu_stall",
          std::string(kmsg::kMessageStart) +
              R"((?:rcu: )?INFO: (\S+) (?:self-detected stall on CPU|detected (?:expedited )?stalls on CPUs/tasks))",
          "RCU stall detected ({})", "flavor"),
      {{{"Machine Check", "hine Check"}}, match_machine_check},
  };
  return r;
}

}  // namespace gpud::components
