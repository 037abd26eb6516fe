#include "components/host/memory.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>

#include "components/kernel_log_support.h"
#include "components/kernel_log_test_util.h"
#include "core/time_util.h"
#include "store/database.h"
#include "store/event_store.h"
#include "testing/peak_rss.h"
#include "testing/temp_dir.h"

namespace gpud::components {
namespace {

std::string fixture_root(const std::string& name) {
  return std::string(GPUD_SOURCE_DIR) + "/testing/fixtures/host/" + name;
}

TEST(MemoryRule, HealthyReasonCarriesUsedTotalAndAvailable) {
  MemorySnapshot s;
  s.total_bytes = 16ULL << 30;
  s.available_bytes = 12ULL << 30;
  s.free_bytes = 10ULL << 30;
  CheckResult r = evaluate_memory(s);
  EXPECT_EQ(r.health(), Health::kHealthy);
  EXPECT_EQ(r.states[0].reason, "memory used 4.0 GiB of 16.0 GiB (25.0%), 12.0 GiB available");
  auto data = r.states[0].data;
  EXPECT_EQ(data["used_bytes"].get<uint64_t>(), 4ULL << 30);
  EXPECT_EQ(data["available_estimated"], false);
}

TEST(MemoryRule, EstimatedAvailableIsSaidInReason) {
  MemorySnapshot s;
  s.total_bytes = 1ULL << 30;
  s.available_bytes = 1ULL << 29;
  s.available_estimated = true;
  CheckResult r = evaluate_memory(s);
  EXPECT_EQ(r.health(), Health::kHealthy);
  EXPECT_NE(r.states[0].reason.find("estimated"), std::string::npos);
}

TEST(MemoryRule, CollectionFailureIsUnhealthyWithError) {
  CheckResult r = evaluate_memory(Result<MemorySnapshot>(make_error("/proc/meminfo: no MemTotal")));
  EXPECT_EQ(r.health(), Health::kUnhealthy);
  EXPECT_EQ(r.states[0].error, "/proc/meminfo: no MemTotal");
}

TEST(MemoryComponent, ReportsFixtureAndPublishesMetrics) {
  Config cfg;
  cfg.host_root = fixture_root("debian12");
  MetricRegistry metrics;
  ComponentContext ctx{&cfg, nullptr, &metrics, false};
  MemoryComponent c(ctx);
  EXPECT_EQ(c.name(), "memory");
  EXPECT_TRUE(c.can_set_healthy());
  CheckResult r = c.check();
  EXPECT_EQ(r.health(), Health::kHealthy) << r.summary();
  std::string text = metrics.prometheus_text();
  for (const char* name : {"memory_total_bytes", "memory_available_bytes", "memory_used_bytes",
                           "memory_free_bytes", "memory_used_percent"}) {
    EXPECT_NE(text.find(std::string(name) + "{gpud_component=\"memory\"}"), std::string::npos)
        << name << "\n"
        << text;
  }
  EXPECT_NE(text.find("memory_total_bytes{gpud_component=\"memory\"} 25276026880"),
            std::string::npos)
      << text;
}

// GPUd (leptonai/gpud 4a8de33a3f02e207f39e9023d67125592d599731, components/memory/component.go)
// reports VmallocTotal and VmallocUsed as "vm_alloc_total_bytes" / "vm_alloc_used_bytes" and the
// BPF JIT's vmalloc areas as "bpf_jit_buffer_bytes" in the state's data, with no threshold on any.
TEST(MemoryComponent, ReportsVmallocAndBpfJitBytesUnderGpudsNamesAndAsGauges) {
  Config cfg;
  cfg.host_root = fixture_root("bpf-jit");
  MetricRegistry metrics;
  ComponentContext ctx{&cfg, nullptr, &metrics, false};
  MemoryComponent c(ctx);
  CheckResult r = c.check();
  EXPECT_EQ(r.health(), Health::kHealthy) << r.summary();
  auto data = r.states[0].data;
  EXPECT_EQ(data["vm_alloc_total_bytes"].get<uint64_t>(), 34359738367ULL * 1024);
  EXPECT_EQ(data["vm_alloc_used_bytes"].get<uint64_t>(), 14412ULL * 1024);
  EXPECT_EQ(data["bpf_jit_buffer_bytes"].get<uint64_t>(), 2134016u);
  EXPECT_NE(r.detail.find("BPF JIT buffer: 2.0 MiB"), std::string::npos) << r.detail;
  const std::string text = metrics.prometheus_text();
  for (const char* line : {"memory_vm_alloc_used_bytes{gpud_component=\"memory\"} 14757888\n",
                           "memory_bpf_jit_buffer_bytes{gpud_component=\"memory\"} 2134016\n",
                           "memory_vm_alloc_total_bytes{gpud_component=\"memory\"} "})
    EXPECT_NE(text.find(line), std::string::npos) << line << "\n" << text;
}

TEST(MemoryComponent, UnreadableVmallocinfoLeavesBpfJitAbsentAndHealthAlone) {
  testing_support::TempDir root;
  ASSERT_FALSE(root.path().empty());
  std::ifstream meminfo(fixture_root("debian12") + "/proc/meminfo");
  root.write("proc/meminfo", std::string(std::istreambuf_iterator<char>(meminfo), {}));
  root.write("proc/vmallocinfo",
             "0xffffffffc0107000-0xffffffffc0109000    8192 bpf_jit_alloc_exec+0xe/0x20 pages=1 "
             "vmalloc N1=1\n");
  Config cfg;
  cfg.host_root = root.path();
  MetricRegistry metrics;
  ComponentContext ctx{&cfg, nullptr, &metrics, false};
  MemoryComponent c(ctx);
  CheckResult r = c.check();
  ASSERT_NE(metrics.prometheus_text().find("memory_bpf_jit_buffer_bytes{gpud_component=\"memory\"} "
                                           "8192\n"),
            std::string::npos);
  // Read at every check from here: what each read gives.
  c.set_bpf_jit_read_interval(std::chrono::seconds(0));

  // A JIT line without its size: the sum is unknown, not the last one, nor a partial one.
  root.write("proc/vmallocinfo",
             "0xffffffffc0107000-0xffffffffc0109000 bpf_jit_alloc_exec+0xe/0x20 pages=1\n");
  r = c.check();
  EXPECT_EQ(r.health(), Health::kHealthy) << r.summary();
  auto data = r.states[0].data;
  EXPECT_FALSE(data.contains("bpf_jit_buffer_bytes")) << data.dump();
  EXPECT_TRUE(data.contains("vm_alloc_used_bytes"));
  std::string text = metrics.prometheus_text();
  EXPECT_EQ(text.find("memory_bpf_jit_buffer_bytes{"), std::string::npos) << text;
  EXPECT_NE(text.find("memory_vm_alloc_used_bytes{"), std::string::npos) << text;

  // /proc/meminfo gone: every memory gauge goes with it.
  std::filesystem::remove(root.path() + "/proc/meminfo");
  r = c.check();
  EXPECT_EQ(r.health(), Health::kUnhealthy);
  text = metrics.prometheus_text();
  for (const char* name : {"memory_total_bytes{", "memory_used_percent{",
                           "memory_vm_alloc_used_bytes{", "memory_bpf_jit_buffer_bytes{"})
    EXPECT_EQ(text.find(name), std::string::npos) << name << "\n" << text;
}

// /proc/vmallocinfo is read at the first check and then at most every kBpfJitReadInterval: the
// checks in between report that reading, a read failing in between does not show until the next
// read, and a failed read is absent until a read succeeds.
TEST(MemoryComponent, VmallocinfoIsReadAtMostEveryInterval) {
  testing_support::TempDir root;
  ASSERT_FALSE(root.path().empty());
  std::ifstream meminfo(fixture_root("debian12") + "/proc/meminfo");
  root.write("proc/meminfo", std::string(std::istreambuf_iterator<char>(meminfo), {}));
  auto jit_line = [](int bytes) {
    return "0xffffffffc0107000-0xffffffffc0109000 " + std::to_string(bytes) +
           " bpf_jit_alloc_exec+0xe/0x20 pages=1 vmalloc N1=1\n";
  };
  root.write("proc/vmallocinfo", jit_line(8192));
  Config cfg;
  cfg.host_root = root.path();
  MetricRegistry metrics;
  ComponentContext ctx{&cfg, nullptr, &metrics, false};
  MemoryComponent c(ctx);
  EXPECT_EQ(c.check().states[0].data.value("bpf_jit_buffer_bytes", 0), 8192);
  root.write("proc/vmallocinfo", jit_line(16384));
  // Within the interval: the first reading, in the state and the gauge.
  EXPECT_EQ(c.check().states[0].data.value("bpf_jit_buffer_bytes", 0), 8192);
  EXPECT_NE(metrics.prometheus_text().find("memory_bpf_jit_buffer_bytes{gpud_component=\"memory\"} "
                                           "8192\n"),
            std::string::npos);
  // The interval over (setting it starts a new one, from the next check's read): read again.
  c.set_bpf_jit_read_interval(MemoryComponent::kBpfJitReadInterval);
  EXPECT_EQ(c.check().states[0].data.value("bpf_jit_buffer_bytes", 0), 16384);
  std::filesystem::remove(root.path() + "/proc/vmallocinfo");
  EXPECT_EQ(c.check().states[0].data.value("bpf_jit_buffer_bytes", 0), 16384);
  c.set_bpf_jit_read_interval(MemoryComponent::kBpfJitReadInterval);
  EXPECT_FALSE(c.check().states[0].data.contains("bpf_jit_buffer_bytes"));
  // Absent, not a kept reading, until a read succeeds.
  root.write("proc/vmallocinfo", jit_line(4096));
  EXPECT_FALSE(c.check().states[0].data.contains("bpf_jit_buffer_bytes"));
  c.set_bpf_jit_read_interval(MemoryComponent::kBpfJitReadInterval);
  EXPECT_EQ(c.check().states[0].data.value("bpf_jit_buffer_bytes", 0), 4096);
}

TEST(MemoryComponent, OldKernelIsHealthyWithEstimate) {
  Config cfg;
  cfg.host_root = fixture_root("old-kernel");
  MetricRegistry metrics;
  ComponentContext ctx{&cfg, nullptr, &metrics, false};
  MemoryComponent c(ctx);
  CheckResult r = c.check();
  EXPECT_EQ(r.health(), Health::kHealthy);
  EXPECT_NE(r.states[0].reason.find("estimated"), std::string::npos);
  (void)c.check();  // second check: no second warning (not observable here, must not crash)
}

TEST(MemoryComponent, MissingMeminfoIsUnhealthy) {
  Config cfg;
  cfg.host_root = fixture_root("aggregate-only");
  ComponentContext ctx{&cfg, nullptr, nullptr, false};
  MemoryComponent c(ctx);
  CheckResult r = c.check();
  EXPECT_EQ(r.health(), Health::kUnhealthy);
  EXPECT_NE(r.states[0].error.find("meminfo"), std::string::npos);
}

TEST(MemoryKernelLogRule, ModernAndLegacySequences) {
  auto v = match_lines(memory_kernel_log_rules(),
                       {"python3 invoked oom-killer: gfp_mask=0x140cca, order=0", "Mem-Info:",
                        "oom-kill:constraint=CONSTRAINT_NONE,nodemask=(null),cpuset=/"
                        ",mems_allowed=0,global_oom,task_memcg=/user.slice,task=python3,pid=98765,"
                        "uid=1000",
                        "Out of memory: Killed process 98765 (python3) total-vm:1kB"});
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0].component, "memory");
  EXPECT_EQ(v[0].name, "OOM");
  EXPECT_EQ(v[0].message, "System OOM encountered, victim process: python3, pid: 98765");
  EXPECT_EQ(v[0].extra_info["pid"], 98765);

  v = match_lines(memory_kernel_log_rules(),
                  {"java invoked oom-killer: gfp_mask=0x14000c0",
                   "Task in /kubepods/pod1 killed as a result of limit of /kubepods/pod1",
                   "Memory cgroup out of memory: Killed process 4242 (java) total-vm:1kB"});
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0].message, "OOM encountered, victim process: java, pid: 4242");
  EXPECT_EQ(v[0].extra_info["task_memcg"], "/kubepods/pod1");
  EXPECT_TRUE(match_lines(memory_kernel_log_rules(), {"Killed process 1 (x)"}).empty())
      << "no start line and not the kernel's shape";
}

// The kernel rate-limits the report's header, not the victim's lines: each kill is one event,
// whichever of its lines (one to three) the log holds.
TEST(MemoryKernelLogRule, EachKillIsOneEventWithOrWithoutTheHeader) {
  auto v = match_lines(
      memory_kernel_log_rules(),
      {"Out of memory: Kill process 27438 (R) score 31 or sacrifice child",
       "Killed process 27438 (R) total-vm:38349780kB, anon-rss:1041924kB, file-rss:4kB",
       "Memory cgroup out of memory: Kill process 42453 (memcg_test_1) score 0 or sacrifice child",
       "Killed process 42453 (memcg_test_1), UID 0, total-vm:7296kB, anon-rss:96kB",
       "Out of memory: Killed process 15784 (python3) total-vm:11964kB, anon-rss:4288kB"});
  ASSERT_EQ(v.size(), 3u);
  EXPECT_EQ(v[0].message, "System OOM encountered, victim process: R, pid: 27438");
  EXPECT_EQ(v[1].message, "OOM encountered, victim process: memcg_test_1, pid: 42453");
  EXPECT_EQ(v[2].extra_info["pid"], 15784);

  // 4.19-5.0: the summary, the choice and the kill of the same pid; a child sacrificed instead.
  v = match_lines(memory_kernel_log_rules(),
                  {"java invoked oom-killer: gfp_mask=0x6200ca(GFP_HIGHUSER_MOVABLE), order=0",
                   "oom-kill:constraint=CONSTRAINT_NONE,nodemask=(null),cpuset=/,mems_allowed=0,"
                   "global_oom,task_memcg=/,task=java,pid=4242,uid=0",
                   "Out of memory: Kill process 4242 (java) score 900 or sacrifice child",
                   "Killed process 4243 (java-child) total-vm:1kB, anon-rss:1kB",
                   "Out of memory: Killed process 5151 (python3) total-vm:1kB, anon-rss:1kB"});
  ASSERT_EQ(v.size(), 2u);
  EXPECT_EQ(v[0].extra_info["pid"], 4242);
  EXPECT_EQ(v[1].extra_info["pid"], 5151);
}

// GPUd's "Multiple OOM events in sequence" (leptonai/gpud components/memory/kmsg_matcher_test.go):
// two reports, the second with 2.6.x's short victim line "%s: Killed process %d (%s).\n"
// (mm/oom_kill.c __oom_kill_task), are two OOMs.
TEST(MemoryKernelLogRule, ShortVictimLineAfterAnotherReportIsASecondOom) {
  auto v =
      match_lines(memory_kernel_log_rules(),
                  {"mysql invoked oom-killer: gfp_mask=0x280da, order=0, oom_score_adj=0",
                   "oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=/,mems_allowed="
                   "0,oom_memcg=/system.slice,task_memcg=/system.slice,task=mysql,pid=11111,"
                   "uid=27",
                   "nginx invoked oom-killer: gfp_mask=0x201d2, order=0, oomkilladj=0",
                   "Out of memory: Killed process 22222 (nginx)."});
  ASSERT_EQ(v.size(), 2u);
  EXPECT_EQ(v[0].message, "OOM encountered, victim process: mysql, pid: 11111");
  EXPECT_EQ(v[1].message, "System OOM encountered, victim process: nginx, pid: 22222");
}

// A tenant's job can have the kernel kill it for memory every few seconds, for the whole events
// retention: the check once read every stored kill into memory and listed them all. Now it reads a
// digest (a count per kind) and the newest few: its peak memory stays flat, and the summary still
// counts every kill.
TEST(MemoryComponent, TwoHundredThousandStoredOomKillsAreSummarizedInFlatMemory) {
  char dir[] = "/tmp/gpud-oom-history-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  struct Cleanup {
    std::string path;
    ~Cleanup() { std::filesystem::remove_all(path); }
  } cleanup{dir};
  auto db = store::Database::open(std::string(dir) + "/gpud.state");
  ASSERT_TRUE(db.ok()) << db.error().message;
  store::EventStore events(**db);
  constexpr int kStored = 200000;
  const int64_t start_s = to_unix_seconds(Clock::now() - std::chrono::hours(13 * 24));
  // One kill every 5 s over thirteen days, each its own victim pid, as the rule stores them.
  ASSERT_TRUE(
      (*db)
          ->exec("WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < " +
                 std::to_string(kStored - 1) +
                 ") INSERT INTO gpud_events(component, unix_seconds, name, type, message, "
                 "extra_info) SELECT 'memory', " +
                 std::to_string(start_s) +
                 " + i * 5, 'OOM', 'Warning', 'OOM encountered, victim process: python3, "
                 "pid: ' || (1000 + i), json_object('pid', 1000 + i, 'victim_process', "
                 "'python3') FROM n")
          .ok());
  Config cfg;
  cfg.host_root = fixture_root("debian12");
  MetricRegistry metrics;
  ComponentContext ctx{&cfg, &events, &metrics, false};
  MemoryComponent c(ctx);
  CheckResult r = c.check();

  testing_support::PeakRssGrowth checks;
  ASSERT_TRUE(checks.measured());
  for (int i = 0; i < 3; ++i) r = c.check();
  const int64_t growth_kib = checks.growth_kib();
  std::cout << "peak RSS growth over three memory checks of 200,000 stored OOM kills: "
            << growth_kib / 1024 << " MiB\n";
#if defined(GPUD_SANITIZED)
  // AddressSanitizer keeps freed memory resident in its quarantine: RSS measures the sanitizer.
  std::cout << "NOTE: the RSS bound is not checked under AddressSanitizer\n";
#else
  EXPECT_LT(growth_kib, 16 * 1024)
      << "peak RSS grew by " << growth_kib / 1024 << " MiB over three checks";
#endif
  EXPECT_EQ(r.health(), Health::kHealthy);
  const std::string newest =
      "OOM encountered, victim process: python3, pid: " + std::to_string(1000 + kStored - 1);
  EXPECT_NE(r.states[0].reason.find("200000 kernel-log events (200000 OOM), latest: " + newest),
            std::string::npos)
      << r.states[0].reason;
  auto listed = nlohmann::json::parse(r.states[0].extra_info.at("kernel_log_events"));
  ASSERT_EQ(listed.size(), kListedKernelLogEvents);
  EXPECT_EQ(listed[0]["message"], newest);
}

}  // namespace
}  // namespace gpud::components
