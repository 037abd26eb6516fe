#include "components/host/pstore.h"

#include <gtest/gtest.h>
#include <sys/time.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "components/host/os.h"
#include "core/config.h"
#include "core/metrics.h"
#include "core/time_util.h"
#include "testing/memory_event_log.h"

namespace gpud::components {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

// A pstore record as the kernel writes it and systemd-pstore copies it: fs/pstore/platform.c
// (pstore_dump, 4.x to 6.x) puts "%s#%d Part%u\n" (the dump reason, the oops count, the part)
// before kmsg_dump's lines, each with printk's syslog prefix "<%u>[%5lu.%06lu] "
// (kernel/printk/printk.c, print_prefix/print_time); the panic's "CPU: %d PID: %d Comm: %.20s"
// line is lib/dump_stack.c's dump_stack_print_info.
constexpr const char* kPanicRecord =
    "Panic#1 Part1\n"
    "<6>[ 5120.104233] sysrq: Trigger a crash\n"
    "<0>[ 5120.104301] Kernel panic - not syncing: sysrq triggered crash\n"
    "<4>[ 5120.104358] CPU: 3 PID: 4242 Comm: bash Tainted: P           OE      6.1.0-18-amd64 #1\n"
    "<4>[ 5120.104400] Hardware name: Supermicro SYS-821GE-TNHR/X13DEG-OAD, BIOS 2.1 01/12/2024\n"
    "<4>[ 5120.104431] Call Trace:\n";

class PstoreRoot {
 public:
  PstoreRoot() {
    dir_ = fs::temp_directory_path() /
           ("gpud-pstore-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter_++));
    fs::create_directories(dir_);
  }
  ~PstoreRoot() { fs::remove_all(dir_); }
  // Writes `text` at <root><path>, modified at `mtime`.
  void write(const std::string& path, const std::string& text, TimePoint mtime) {
    const fs::path p = dir_ / path.substr(1);
    fs::create_directories(p.parent_path());
    std::ofstream(p) << text;
    const timeval times[2] = {{static_cast<time_t>(to_unix_seconds(mtime)), 0},
                              {static_cast<time_t>(to_unix_seconds(mtime)), 0}};
    ::utimes(p.c_str(), times);
  }
  std::string path() const { return dir_.string(); }

 private:
  static inline int counter_ = 0;
  fs::path dir_;
};

const TimePoint kNow = from_unix_seconds(1'765'000'000);

TEST(Pstore, APanicCopiedBySystemdPstoreIsOneEventAtItsFilesTime) {
  PstoreRoot root;
  root.write("/var/lib/systemd/pstore/1764990000/dmesg.txt", kPanicRecord, kNow - 2h);
  auto events = pstore_panic_events(host::HostFs(root.path()), kNow);
  ASSERT_EQ(events.size(), 1u);
  const Event& e = events[0];
  EXPECT_EQ(e.component, "os");
  EXPECT_EQ(e.name, "kernel_panic");
  EXPECT_EQ(e.type, EventType::kWarning);
  EXPECT_EQ(e.time, kNow - 2h);
  EXPECT_EQ(e.message, "Kernel panic detected - CPU: 3, PID: 4242, Process: bash (pstore)");
  EXPECT_EQ(e.extra_info.value("pstore_file", ""),
            "/var/lib/systemd/pstore/1764990000/dmesg.txt");
  EXPECT_EQ(e.extra_info.value("log_line", ""), "Kernel panic - not syncing: sysrq triggered crash");
  EXPECT_EQ(e.extra_info.value("process", ""), "bash");
}

TEST(Pstore, RecordsLeftInSysfsAreReadToo) {
  PstoreRoot root;
  root.write("/sys/fs/pstore/dmesg-efi-176499000001001", kPanicRecord, kNow - 10min);
  root.write("/sys/fs/pstore/console-ramoops-0", "<6>[    0.000000] Linux version 6.1.0\n",
             kNow - 10min);
  auto events = pstore_panic_events(host::HostFs(root.path()), kNow);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].extra_info.value("pstore_file", ""),
            "/sys/fs/pstore/dmesg-efi-176499000001001");
}

TEST(Pstore, OldLargeDeepLinkedOrMissingRecordsAreNotRead) {
  PstoreRoot root;
  host::HostFs fs(root.path());
  EXPECT_TRUE(pstore_panic_events(fs, kNow).empty()) << "no pstore directory at all";
  // Older than the 72 h GPUd looks back.
  root.write("/var/lib/systemd/pstore/1/dmesg.txt", kPanicRecord, kNow - 73h);
  // Deeper than three directories below the pstore directory.
  root.write("/var/lib/systemd/pstore/a/b/c/d/dmesg.txt", kPanicRecord, kNow - 1h);
  // Larger than the limit.
  PstoreLimits small;
  small.max_file_bytes = 100;
  root.write("/var/lib/systemd/pstore/2/dmesg.txt", kPanicRecord, kNow - 1h);
  EXPECT_TRUE(pstore_panic_events(fs, kNow, small).empty());
  // A link is not followed (the record it names is read where it lies, if under pstore).
  fs::remove_all(root.path() + "/var/lib/systemd/pstore/2");
  root.write("/elsewhere/dmesg.txt", kPanicRecord, kNow - 1h);
  fs::create_symlink(root.path() + "/elsewhere/dmesg.txt",
                     root.path() + "/var/lib/systemd/pstore/link.txt");
  EXPECT_TRUE(pstore_panic_events(fs, kNow).empty());
  // A record within reach is read with the default limits: only it.
  root.write("/var/lib/systemd/pstore/3/dmesg.txt", kPanicRecord, kNow - 1h);
  EXPECT_EQ(pstore_panic_events(fs, kNow).size(), 1u);
}

TEST(Pstore, TheOsComponentImportsAPanicOnceAcrossRestarts) {
  PstoreRoot root;
  const TimePoint recent = std::chrono::time_point_cast<std::chrono::seconds>(Clock::now() - 1h);
  root.write("/var/lib/systemd/pstore/1764990000/dmesg.txt", kPanicRecord, recent);
  Config config;
  config.host_root = root.path();
  testing_support::MemoryEventLog log;
  MetricRegistry metrics;
  ComponentContext ctx{&config, &log, &metrics, false};
  OsComponent(ctx).start();
  OsComponent(ctx).start();  // a daemon restart reads the same record again
  auto panics = log.named("kernel_panic");
  ASSERT_EQ(panics.size(), 1u);
  EXPECT_EQ(panics[0].time, recent);
}

}  // namespace
}  // namespace gpud::components
