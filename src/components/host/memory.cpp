#include "components/host/memory.h"

#include <fmt/format.h>
#include <re2/re2.h>

#include "components/kernel_log_support.h"
#include "components/snapshot_metric.h"
#include "core/log.h"
#include "host/bytes.h"
#include "host/vmallocinfo.h"
#include "kmsg/parser.h"

namespace gpud::components {

using host::human_bytes;

nlohmann::json to_json(const MemorySnapshot& s) {
  nlohmann::json j;
  j["total_bytes"] = s.total_bytes;
  j["available_bytes"] = s.available_bytes;
  j["used_bytes"] = s.used_bytes();
  j["free_bytes"] = s.free_bytes;
  j["used_percent"] = s.used_percent();
  j["buffers_bytes"] = s.buffers_bytes;
  j["cached_bytes"] = s.cached_bytes;
  j["shmem_bytes"] = s.shmem_bytes;
  j["swap_total_bytes"] = s.swap_total_bytes;
  j["swap_free_bytes"] = s.swap_free_bytes;
  j["available_estimated"] = s.available_estimated;
  // GPUd's names for these three; each absent when it could not be read.
  if (s.vmalloc_total_bytes) j["vm_alloc_total_bytes"] = *s.vmalloc_total_bytes;
  if (s.vmalloc_used_bytes) j["vm_alloc_used_bytes"] = *s.vmalloc_used_bytes;
  if (s.bpf_jit_buffer_bytes) j["bpf_jit_buffer_bytes"] = *s.bpf_jit_buffer_bytes;
  return j;
}

CheckResult evaluate_memory(const Result<MemorySnapshot>& snapshot) {
  if (!snapshot) {
    CheckResult r = single_state("memory", Health::kUnhealthy, "failed to collect memory stats");
    r.states[0].error = snapshot.error().message;
    r.detail = "error: " + snapshot.error().message + "\n";
    return r;
  }
  const MemorySnapshot& s = *snapshot;
  std::string reason =
      fmt::format("memory used {} of {} ({:.1f}%), {} available{}", human_bytes(s.used_bytes()),
                  human_bytes(s.total_bytes), s.used_percent(), human_bytes(s.available_bytes),
                  s.available_estimated ? " (estimated: no MemAvailable)" : "");
  CheckResult r =
      single_state("memory", Health::kHealthy, std::move(reason), std::nullopt, to_json(s));
  r.detail = fmt::format("total: {}\nused: {} ({:.1f}%)\navailable: {}{}\nfree: {}\n",
                         human_bytes(s.total_bytes), human_bytes(s.used_bytes()), s.used_percent(),
                         human_bytes(s.available_bytes),
                         s.available_estimated ? " (estimated as free + buffers + cached)" : "",
                         human_bytes(s.free_bytes));
  if (s.vmalloc_used_bytes && s.vmalloc_total_bytes)
    r.detail += fmt::format("vmalloc used: {} of {}\n", human_bytes(*s.vmalloc_used_bytes),
                            human_bytes(*s.vmalloc_total_bytes));
  if (s.bpf_jit_buffer_bytes)
    r.detail += fmt::format("BPF JIT buffer: {}\n", human_bytes(*s.bpf_jit_buffer_bytes));
  return r;
}

namespace {

constexpr SnapshotMetric<MemorySnapshot> kMetrics[] = {
    {.name = "memory_total_bytes",
     .help = "Total usable host memory in bytes",
     .value = [](const MemorySnapshot& s) { return metric_value(s.total_bytes); }},
    {.name = "memory_available_bytes",
     .help = "Host memory available for new allocations in bytes",
     .value = [](const MemorySnapshot& s) { return metric_value(s.available_bytes); }},
    {.name = "memory_used_bytes",
     .help = "Host memory in use (total - available) in bytes",
     .value = [](const MemorySnapshot& s) { return metric_value(s.used_bytes()); }},
    {.name = "memory_free_bytes",
     .help = "Unused host memory (MemFree) in bytes",
     .value = [](const MemorySnapshot& s) { return metric_value(s.free_bytes); }},
    {.name = "memory_used_percent",
     .help = "Host memory in use in percent of total",
     .value = [](const MemorySnapshot& s) { return metric_value(s.used_percent()); }},
    {.name = "memory_vm_alloc_total_bytes",
     .help = "Size of the vmalloc address space (VmallocTotal)",
     .value = [](const MemorySnapshot& s) { return metric_value(s.vmalloc_total_bytes); }},
    {.name = "memory_vm_alloc_used_bytes",
     .help = "Memory mapped in vmalloc space (VmallocUsed)",
     .value = [](const MemorySnapshot& s) { return metric_value(s.vmalloc_used_bytes); }},
    {.name = "memory_bpf_jit_buffer_bytes",
     .help = "Bytes the BPF JIT holds in vmalloc space (/proc/vmallocinfo)",
     .value = [](const MemorySnapshot& s) { return metric_value(s.bpf_jit_buffer_bytes); }},
};
static_assert(valid_metric_table(kMetrics));

}  // namespace

MemoryComponent::MemoryComponent(const ComponentContext& ctx)
    : Component(ctx), fs_(ctx.config->host_root) {
  describe_metrics(ctx.metrics, kMetrics);
}

void MemoryComponent::set_bpf_jit_read_interval(std::chrono::steady_clock::duration d) {
  std::lock_guard lock(bpf_jit_mu_);
  bpf_jit_read_interval_ = d;
  bpf_jit_read_at_.reset();
}

std::optional<uint64_t> MemoryComponent::bpf_jit_bytes() {
  std::lock_guard lock(bpf_jit_mu_);
  const auto now = std::chrono::steady_clock::now();
  if (bpf_jit_read_at_ && now - *bpf_jit_read_at_ < bpf_jit_read_interval_) return bpf_jit_bytes_;
  bpf_jit_read_at_ = now;
  // GPUd turns a failed read as root Unhealthy and reports 0 otherwise; here the value is absent
  // and health is /proc/meminfo's alone: the JIT's usage is a hint, not a fault.
  auto bpf_jit = host::read_bpf_jit_bytes(fs_);
  if (bpf_jit) {
    bpf_jit_bytes_ = *bpf_jit;
    bpf_jit_failing_ = false;
  } else {
    bpf_jit_bytes_.reset();
    if (!bpf_jit_failing_.exchange(true))
      logger("memory")->warn("no BPF JIT buffer size: {}", bpf_jit.error().message);
  }
  return bpf_jit_bytes_;
}

CheckResult MemoryComponent::check() {
  Result<MemorySnapshot> snapshot = [&]() -> Result<MemorySnapshot> {
    auto text = fs_.read("/proc/meminfo");
    if (!text) return text.error();
    auto meminfo = host::parse_meminfo(*text);
    if (!meminfo) return meminfo.error();
    MemorySnapshot s{*meminfo};
    s.bpf_jit_buffer_bytes = bpf_jit_bytes();
    return s;
  }();
  if (snapshot && snapshot->available_estimated && !warned_estimate_.exchange(true))
    logger("memory")->warn(
        "/proc/meminfo has no MemAvailable (kernel < 3.14); estimating it as "
        "free + buffers + cached");
  publish_metrics(ctx().metrics, name(), kMetrics, snapshot);
  CheckResult r = evaluate_memory(snapshot);
  // OOM kills from the kernel log are listed; they do not change health (GPUd's behaviour).
  append_kernel_log_events(r, ctx(), name());
  return r;
}

namespace {

// One OOM kill is one event, whichever of its lines the log kept. A full report opens with
// "invoked oom-killer" and names its victim in one to three lines: "oom-kill:...,task=X,pid=N"
// (4.19+), "[Memory cgroup ]Out of memory: Kill process N (X) score S or sacrifice child" (before
// 5.1) and "[...]Killed process N (X)[, UID U], total-vm:..."; the legacy memcg report adds "Task
// in /A killed as a result of limit of /B". The header is rate-limited by the kernel, so a victim
// line also stands alone; the victim lines that follow the first one of the same kill (the same
// pid, or the child sacrificed instead) are not a second OOM.
class OomReport : public kmsg::LineSequence {
 public:
  std::optional<kmsg::Match> feed(std::string_view s) override {
    if (kmsg::contains(s, "invoked oom-killer")) {
      pending_ = true;
      task_memcg_.clear();
      last_pid_ = -1;
      sacrificed_ = false;
      return std::nullopt;
    }
    static const RE2 kOomKill(R"(oom-kill:.*?(?:task_memcg=([^,]*),)?task=([^,]+),pid=(\d+))");
    static const RE2 kOomMemcg(R"(oom_memcg=([^,]*))");
    static const RE2 kTaskIn(R"(Task in (.*) killed as a result of limit of (.*))");
    static const RE2 kKilled(R"(Kill(?:ed)? process (\d+),? (?:UID \d+, )?\((.*?)\)(?:[ ,.]|$))");
    // The kernel's own "%s: Kill(ed) process" at the start of the message (mm/oom_kill.c): a
    // victim line with this header is an OOM even alone and without total-vm (2.6.x "Out of
    // memory: Killed process N (comm).", "Out of Memory: Kill process N (comm) score S and
    // children.").
    static const RE2 kKernelVictim(
        std::string(kmsg::kMessageStart) +
        R"((?:Out of [Mm]emory(?: \(oom_kill_allocating_task\))?|Memory cgroup out of memory): Kill(?:ed)? process )");
    const re2::StringPiece in(s.data(), s.size());
    std::string oom_memcg, task_memcg, name, memcg, limit;
    long long pid = 0;
    bool cgroup = false;
    if (kmsg::contains(s, "oom-kill:") &&
        RE2::PartialMatch(in, kOomKill, &task_memcg, &name, &pid)) {
      (void)RE2::PartialMatch(in, kOomMemcg, &oom_memcg);
      cgroup = !oom_memcg.empty() && oom_memcg != "/";
    } else if (pending_ && kmsg::contains(s, "killed as a result of limit") &&
               RE2::PartialMatch(in, kTaskIn, &memcg, &limit)) {
      task_memcg_ = memcg;
      return std::nullopt;
    } else if (kmsg::contains(s, "ill") && RE2::PartialMatch(in, kKilled, &pid, &name) &&
               (pending_ || kmsg::contains(s, "or sacrifice child") ||
                kmsg::contains(s, "total-vm:") || RE2::PartialMatch(in, kKernelVictim))) {
      // Outside a report only the kernel's own shapes count, not any "Killed process" text.
      cgroup = kmsg::contains(s, "Memory cgroup out of memory") ||
               (!task_memcg_.empty() && task_memcg_ != "/");
      task_memcg = task_memcg_;
    } else {
      return std::nullopt;
    }
    pending_ = false;
    const bool same_kill = pid == last_pid_ || (sacrificed_ && kmsg::contains(s, "Killed process"));
    last_pid_ = pid;
    sacrificed_ = kmsg::contains(s, "or sacrifice child");
    if (same_kill) return std::nullopt;
    kmsg::Match m;
    m.name = "OOM";
    m.message =
        kmsg::sanitize_utf8(std::string(cgroup ? "OOM encountered" : "System OOM encountered") +
                            ", victim process: " + name + ", pid: " + std::to_string(pid));
    m.extra_info = {{"victim_process", kmsg::sanitize_utf8(name)},
                    {"pid", pid},
                    {"log_line", kmsg::log_line_excerpt(s)}};
    if (!task_memcg.empty()) m.extra_info["task_memcg"] = kmsg::sanitize_utf8(task_memcg);
    if (!oom_memcg.empty()) m.extra_info["oom_memcg"] = kmsg::sanitize_utf8(oom_memcg);
    return m;
  }
  bool pending() const override { return pending_; }

 private:
  bool pending_ = false;
  std::string task_memcg_;   // legacy "Task in X killed as a result of limit"
  long long last_pid_ = -1;  // the victim of the latest kill
  bool sacrificed_ = false;  // its line offered to "sacrifice child": a child may die instead
};

// drivers/edac/edac_mc.c edac_ce_error / edac_ue_error (3.x-6.x) through edac_mc_printk's "EDAC
// MC%d: ": "%d CE %s%son %s (...)" and "%d UE %s%son %s (...)".
std::optional<kmsg::Match> match_edac(std::string_view s) {
  static const RE2 kRe(std::string(kmsg::kMessageStart) +
                       R"(EDAC MC(\d+): (\d+) (CE|UE) (.*?)(?: \(|$))");
  int mc = 0;
  long long count = 0;
  std::string kind, what;
  if (!RE2::PartialMatch(re2::StringPiece(s.data(), s.size()), kRe, &mc, &count, &kind, &what))
    return std::nullopt;
  const bool ue = kind == "UE";
  kmsg::Match m;
  m.name = ue ? "edac_uncorrectable_errors" : "edac_correctable_errors";
  m.type = ue ? EventType::kCritical : EventType::kWarning;
  m.message = kmsg::sanitize_utf8(fmt::format("{} {} memory error(s) on memory controller {}: {}",
                                              count, ue ? "uncorrectable" : "correctable", mc,
                                              what.substr(0, 200)));
  m.extra_info = {{"mc", mc}, {"count", count}, {"log_line", kmsg::log_line_excerpt(s)}};
  return m;
}

}  // namespace

kmsg::ComponentRules memory_kernel_log_rules() {
  kmsg::ComponentRules r;
  r.component = "memory";
  // mm/oom_kill.c out_of_memory with no victim left: older kernels panic with "Out of memory and
  // no killable processes...", newer ones print it (a cgroup's or sysrq's OOM stops there) and
  // panic with "System is deadlocked on memory"; check_panic_on_oom panics with "Out of memory:
  // <compulsory|system-wide> panic_on_oom is enabled". kernel/panic.c adds "Kernel panic - not
  // syncing: ".
  const std::string start(kmsg::kMessageStart);
  r.lines = {
      kmsg::pattern_rule({{"no killable processes"}}, "oom_no_killable_process",
                         start + R"(Out of memory and no killable processes)",
                         "out of memory and no killable processes"),
      kmsg::pattern_rule(
          {{"not syncing: Out of memory", "ncing: Out"}, {"deadlocked on memory"}}, "oom_panic",
          start +
              R"(Kernel panic - not syncing: (Out of memory(?:: \S+ panic_on_oom is enabled| and no killable processes\.\.\.)|System is deadlocked on memory))",
          "kernel panic on out of memory ({})", "reason"),
      // Every CE/UE line (3.5+) holds "page:0x%lx offset:0x%lx grain:%ld".
      {{{"offset:0x"}}, match_edac},
  };
  r.sequences.push_back(
      {{{"oom-killer"}, {"oom-kill:constraint"}, {"Kill process"}, {"Killed process"}},
       [] { return std::make_unique<OomReport>(); }});
  return r;
}

}  // namespace gpud::components
