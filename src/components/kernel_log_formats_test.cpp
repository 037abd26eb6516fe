// Real-world kernel-log formats (testing/fixtures/kmsg/formats.txt, one family a section, each
// line's source beside it) through every component's rules, as the daemon runs them: each line
// lands in its component with its event name, and the negatives make no event.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "components/registry.h"
#include "kmsg/event_pipeline.h"
#include "kmsg/rules.h"
#include "store/database.h"
#include "store/event_store.h"

#ifndef GPUD_SOURCE_DIR
#define GPUD_SOURCE_DIR "."
#endif

namespace gpud::components {
namespace {

struct FormatCase {
  std::string component;  // "" for a line that must make no event
  std::string name;
  std::vector<std::pair<std::string, std::string>> extra;  // expected extra_info values
  std::string message;
  int line_no = 0;
};

// The cases of one `[family]` section of the fixture.
std::vector<FormatCase> family(const std::string& wanted) {
  std::ifstream in(std::string(GPUD_SOURCE_DIR) + "/testing/fixtures/kmsg/formats.txt");
  EXPECT_TRUE(in.good()) << "testing/fixtures/kmsg/formats.txt";
  std::vector<FormatCase> out;
  std::string line, current;
  for (int n = 1; std::getline(in, line); ++n) {
    if (line.empty() || line[0] == '#') continue;
    if (line[0] == '[') {
      current = line.substr(1, line.find(']') - 1);
      continue;
    }
    if (current != wanted) continue;
    const auto bar = line.find(" | ");
    EXPECT_NE(bar, std::string::npos) << "formats.txt:" << n;
    if (bar == std::string::npos) continue;
    FormatCase c;
    c.message = line.substr(bar + 3);
    c.line_no = n;
    std::istringstream head(line.substr(0, bar));
    std::string word;
    head >> word;
    if (word != "-") {
      c.component = word;
      head >> c.name;
      while (head >> word) {
        const auto eq = word.find('=');
        if (eq == std::string::npos && !c.extra.empty())  // "error_type=Data Link Layer"
          c.extra.back().second += " " + word;
        else
          c.extra.emplace_back(word.substr(0, eq), word.substr(eq + 1));
      }
    }
    out.push_back(std::move(c));
  }
  return out;
}

std::string as_text(const nlohmann::json& v) {
  return v.is_string() ? v.get<std::string>() : v.dump();
}

// Each case alone through every component's rules (a fresh matcher: no sequence carries over).
void expect_family(const std::string& name, size_t min_positives) {
  const auto cases = family(name);
  size_t positives = 0;
  for (const FormatCase& c : cases) {
    kmsg::RuleMatcher m(all_kernel_log_rules());
    const auto got = m.feed(c.message);
    const std::string where = "formats.txt:" + std::to_string(c.line_no) + ": " + c.message;
    if (c.component.empty()) {
      EXPECT_TRUE(got.empty()) << where << "\n  made " << got.front().component << "/"
                               << got.front().name;
      continue;
    }
    ++positives;
    ASSERT_EQ(got.size(), 1u) << where;
    EXPECT_EQ(got[0].component, c.component) << where;
    EXPECT_EQ(got[0].name, c.name) << where;
    for (const auto& [key, value] : c.extra) {
      ASSERT_TRUE(got[0].extra_info.contains(key)) << where << "\n  no " << key;
      EXPECT_EQ(as_text(got[0].extra_info[key]), value) << where << "\n  " << key;
    }
    EXPECT_FALSE(got[0].extra_info.value("injected", false)) << where;
  }
  EXPECT_GE(positives, min_positives) << "family " << name;
  EXPECT_LT(positives, cases.size()) << "family " << name << " has no negative";
}

TEST(KernelLogFormats, MemoryOomKillerLines) { expect_family("memory", 23); }
TEST(KernelLogFormats, CpuSoftLockupsHungTasksRcuStallsMachineChecks) { expect_family("cpu", 15); }
TEST(KernelLogFormats, DiskNvmeFilesystemAndBlockErrors) { expect_family("disk", 27); }
TEST(KernelLogFormats, PciAerBusErrorLines) { expect_family("pci", 16); }
TEST(KernelLogFormats, OsOopsesKernelBugsAndNetworkDevices) { expect_family("os", 14); }
TEST(KernelLogFormats, InfinibandMlx5HealthCommandsProbeTxAndModules) {
  expect_family("infiniband", 18);
}
TEST(KernelLogFormats, XidLostGpuWithoutAnXidLine) { expect_family("xid", 5); }

// Every component's rules behind the daemon's event pipeline (dedup and all), over an in-memory
// store.
std::unique_ptr<store::Database> memory_db() {
  auto r = store::Database::open_in_memory();
  return std::move(*r);
}

struct Daemonlike {
  std::unique_ptr<store::Database> db = memory_db();
  store::EventStore events{*db};
  MetricRegistry metrics;
  kmsg::EventPipeline pipeline{all_kernel_log_rules(), events, metrics, {}};
};

// One lost GPU, told twice in the same second ("Xid 79" and "GPU at ... has fallen off the bus",
// as drivers print them), is one stored event; the same pair later on another GPU is another.
TEST(KernelLogFormats, LostGpuToldTwiceInOneSecondIsOneEvent) {
  Daemonlike daemon;
  kmsg::EventPipeline& d = daemon.pipeline;
  const TimePoint t = Clock::from_time_t(1'700'000'000);
  EXPECT_EQ(d.feed_message("NVRM: Xid (PCI:0000:01:00): 79, GPU has fallen off the bus.", t), 1);
  EXPECT_EQ(d.feed_message("NVRM: GPU at 0000:01:00.0 has fallen off the bus.", t), 0);
  EXPECT_EQ(d.feed_message("NVRM: GPU at PCI:0000:01:00: GPU has fallen off the bus.", t), 0);
  EXPECT_EQ(d.feed_message("NVRM: GPU at 0000:02:00.0 has fallen off the bus.", t), 1);
  EXPECT_EQ(d.stored(), 2u);
}

// The two lines the kernel prints for one AER error (the summary and the detail) name the same
// device and are one event.
TEST(KernelLogFormats, AerSummaryAndDetailOfOneErrorAreOneEvent) {
  Daemonlike daemon;
  kmsg::EventPipeline& d = daemon.pipeline;
  const TimePoint t = Clock::from_time_t(1'700'000'000);
  EXPECT_EQ(d.feed_message("pcieport 0000:00:1c.1: AER: Corrected error received: 0000:00:1c.1", t),
            1);
  EXPECT_EQ(d.feed_message("pcieport 0000:00:1c.1: PCIe Bus Error: severity=Corrected, "
                           "type=Data Link Layer, (Transmitter ID)",
                           t),
            0);
  EXPECT_EQ(
      d.feed_message("pcieport 0000:00:1d.0: AER: Multiple Corrected error received: id=00e8", t),
      1);
  EXPECT_EQ(d.feed_message("pcieport 0000:00:1d.0: PCIe Bus Error: severity=Corrected, "
                           "type=Physical Layer, id=00e8(Receiver ID)",
                           t),
            0);
}

}  // namespace
}  // namespace gpud::components
