// Every component's kernel-log rules together, as the daemon runs them: each literal reaches its
// rule through the prefilter, ordinary lines do not, every saved-log format gives the same events,
// and no line can make a rule throw.
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <sstream>

#include "components/registry.h"
#include "kmsg/parser.h"
#include "kmsg/reader.h"
#include "kmsg/rules.h"

#ifndef GPUD_SOURCE_DIR
#define GPUD_SOURCE_DIR "."
#endif

namespace gpud::components {
namespace {

using kmsg::KmsgRecordView;

std::string fixture(const std::string& name) {
  return std::string(GPUD_SOURCE_DIR) + "/testing/fixtures/kmsg/" + name;
}

std::map<std::string, int> scan(const std::string& path, kmsg::ReadStats* stats = nullptr) {
  std::map<std::string, int> names;
  kmsg::RuleMatcher m(all_kernel_log_rules());
  auto r = kmsg::read_saved_log_file(path, [&](const KmsgRecordView& v) {
    for (const auto& x : m.feed(v.message)) {
      names[x.name +
            (x.extra_info.contains("xid") ? std::to_string(x.extra_info["xid"].get<int>()) : "")]++;
      EXPECT_NO_THROW((void)nlohmann::json(x.extra_info).dump());
      EXPECT_NO_THROW((void)nlohmann::json(x.message).dump());
    }
  });
  EXPECT_TRUE(r.ok()) << path;
  if (stats && r.ok()) *stats = *r;
  return names;
}

TEST(SavedLog, EveryFormatYieldsTheSameEvents) {
  const auto want = scan(fixture("bare.log"));
  EXPECT_EQ(want.at("error_xid79"), 2);
  for (int x : {63, 64, 94, 48, 119, 13, 31, 145})
    EXPECT_EQ(want.count("error_xid" + std::to_string(x)), 1u) << x;
  for (const char* n :
       {"error_sxid", "OOM", "cpu_blocked_too_long", "cpu_soft_lockup", "kernel_panic",
        "nvme_controller_timeout", "buffer_io_error", "nfs_server_not_responding",
        "pcie_aer_corrected", "pcie_aer_uncorrected_nonfatal"}) {
    EXPECT_EQ(want.count(n), 1u) << n;
  }
  for (const char* f : {"raw-kmsg.log", "dmesg.log", "dmesg-T.log", "dmesg-iso.log",
                        "journalctl-k.log", "syslog.log", "mixed-crlf.log"}) {
    // mixed-crlf.log ends in lines that carry an Xid's text after garbage: no driver began them,
    // so they make no event.
    EXPECT_EQ(scan(fixture(f)), want) << f;
  }
  EXPECT_EQ(scan(fixture("multiline-fallen.log")).at("error_xid79"), 1);
}

TEST(Fuzz, RandomBytesNeverCrash) {
  std::mt19937 rng(1234);
  const std::vector<std::string> seeds = {"NVRM: Xid (PCI:0000:3b:00): 79, pid=",
                                          "SXid (PCI:",
                                          "invoked oom-killer",
                                          "oom-kill:",
                                          "Kernel panic",
                                          "CPU: 1 PID: 2 Comm: ",
                                          "AER: Corrected error received: ",
                                          "[  1.0] ",
                                          "6,1,2,-;",
                                          "Jan 01 00:00:00 h kernel: ",
                                          "2024-01-01T00:00:00,1+00:00 ",
                                          "NVRM: The NVIDIA GPU 0000:3b:00.0",
                                          "NETIR_LINK_EVT Fatal XC0 i0 Link 08 (0x",
                                          "nfs: server "};
  kmsg::RuleMatcher m(all_kernel_log_rules());
  kmsg::RuleMatcher fresh(all_kernel_log_rules());
  std::string all;
  for (int i = 0; i < 20000; ++i) {
    std::string s;
    const int parts = static_cast<int>(rng() % 4);
    for (int p = 0; p < parts; ++p) {
      if (rng() % 2) s += seeds[rng() % seeds.size()];
      const int n = static_cast<int>(rng() % 24);
      for (int k = 0; k < n; ++k) s.push_back(static_cast<char>(rng() % 256));
    }
    if (rng() % 200 == 0) s.resize(s.size() + rng() % 100000, 'z');
    if (rng() % 3 == 0 && !s.empty()) s.resize(rng() % s.size());
    auto r = kmsg::parse_line(s);
    if (r) {
      EXPECT_NO_THROW((void)nlohmann::json(r->message).dump());
    }
    for (const auto& x : m.feed(s)) EXPECT_NO_THROW((void)x.extra_info.dump());
    (void)fresh.feed(s);
    all += s;
    all += '\n';
  }
  std::istringstream in(all);
  auto r = kmsg::read_saved_log(in, [&](const KmsgRecordView& v) { (void)m.feed(v.message); });
  EXPECT_TRUE(r.ok());
}

TEST(AllKernelLogRules, EveryLiteralPassesThePrefilterAtEveryAlignment) {
  kmsg::RuleMatcher m(all_kernel_log_rules());
  const auto keywords = m.keywords();
  EXPECT_GE(keywords.size(), 30u);
  for (const std::string& k : keywords)
    for (size_t pad = 0; pad < 12; ++pad)
      EXPECT_TRUE(m.may_match(std::string(pad, 'x') + k + " tail")) << k << " " << pad;
}

// The shortest literal of all rules sets the prefilter's stride (every len - 3 bytes): at 6 bytes
// `scan --kernel-log` fell below grep's speed (docs/COMPONENTS.md, "Throughput").
TEST(AllKernelLogRules, EveryLiteralIsAtLeastNineBytes) {
  kmsg::RuleMatcher m(all_kernel_log_rules());
  for (const std::string& k : m.keywords()) EXPECT_GE(k.size(), 9u) << "\"" << k << "\"";
}

TEST(AllKernelLogRules, PrefilterRejectsOrdinaryLines) {
  kmsg::RuleMatcher m(all_kernel_log_rules());
  EXPECT_FALSE(m.may_match("usb 1-1: new high-speed USB device number 2 using xhci_hcd"));
  EXPECT_FALSE(m.may_match(""));
  EXPECT_TRUE(m.may_match("xx NVRM: Xid (PCI:0000:3b:00): 79"));
  EXPECT_TRUE(m.may_match("pcieport 0000:00:01.0: AER: Corrected error received: 0000:01:00.0"));
  EXPECT_TRUE(m.may_match("AER: Multiple Uncorrected (Non-Fatal) error received: 0000:01:00.0"));
  EXPECT_FALSE(m.may_match("pcieport 0000:00:01.0: AER: enabled with IRQ 120"));
  // Lines sharing words with a literal ("filesystem", "Kernel") are not candidates.
  EXPECT_FALSE(m.may_match("EXT4-fs (nvme0n1p2): mounted filesystem with ordered data mode."));
  EXPECT_FALSE(m.may_match("nvidia-modeset: Loading NVIDIA Kernel Mode Setting Driver 535.161.08"));
}

// Each component's events come from its own rules only: a line is one component's.
TEST(AllKernelLogRules, EachRuleSetNamesItsOwnComponent) {
  for (const kmsg::ComponentRules& r : all_kernel_log_rules()) {
    EXPECT_FALSE(r.component.empty());
    EXPECT_TRUE(r.lines.size() + r.sequences.size() > 0) << r.component;
  }
}

}  // namespace
}  // namespace gpud::components
