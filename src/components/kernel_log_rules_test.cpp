// Every component's kernel-log rules together, as the daemon runs them: each literal reaches its
// rule through the prefilter, ordinary lines do not, every saved-log format gives the same events,
// and no line can make a rule throw.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
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

// Every line of the kernel-log fixtures; of formats.txt, each case's message.
std::vector<std::string> fixture_lines() {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(fixture(""))) {
    const bool cases = e.path().filename() == "formats.txt";
    std::ifstream in(e.path());
    for (std::string line; std::getline(in, line);) {
      if (!cases) {
        out.push_back(line);
      } else if (auto bar = line.find(" | "); bar != std::string::npos && line[0] != '#') {
        out.push_back(line.substr(bar + 3));
      }
    }
  }
  return out;
}

// Whether any rule, asked directly (no prefilter before it), makes something of the line or
// opens a sequence with it.
bool some_rule_takes(const std::vector<kmsg::ComponentRules>& rules, std::string_view message) {
  for (const kmsg::ComponentRules& c : rules) {
    for (const kmsg::LineRule& r : c.lines)
      if (r.match(message)) return true;
    for (const kmsg::SequenceRule& r : c.sequences) {
      auto seq = r.make();
      if (seq->feed(message) || seq->pending()) return true;
    }
  }
  return false;
}

// The prefilter runs before every rule: a line it drops is never matched. Every fixture line
// that some rule takes, asked without the prefilter, passes it, raw (prefix and all, as a saved
// log's reader asks; a journal record whose message is bytes by its own test) and as its parsed
// message, alone and among other lines (with the reader's keywords: the rules' and the encoded
// message's).
TEST(AllKernelLogRules, PrefilterPassesEveryLineARuleTakes) {
  const auto rules = all_kernel_log_rules();
  kmsg::RuleMatcher m(all_kernel_log_rules());
  std::vector<kmsg::Literal> keywords = m.literals();
  keywords.push_back({kmsg::kEncodedMessageKey});
  const kmsg::Prefilter pf(keywords);
  std::string block;
  std::vector<size_t> taken_at;
  int taken = 0;
  for (const std::string& raw : fixture_lines()) {
    auto rec = kmsg::parse_line(raw);
    if (!rec || !some_rule_takes(rules, rec->message)) {
      block += raw + "\n";
      continue;
    }
    ++taken;
    EXPECT_TRUE(m.may_match(raw) || kmsg::message_is_encoded(raw)) << raw;
    EXPECT_TRUE(m.may_match(rec->message)) << raw;
    EXPECT_NE(pf.find(raw), std::string_view::npos) << raw;
    taken_at.push_back(block.size());
    block += raw + "\n";
  }
  EXPECT_GE(taken, 100);
  // Among many lines: walking the block from hit to hit's next line visits every taken line.
  std::vector<size_t> found;
  for (size_t from = 0; from < block.size();) {
    const size_t hit = pf.find(block, from);
    if (hit == std::string_view::npos) break;
    const size_t ls = block.rfind('\n', hit) == std::string::npos ? 0 : block.rfind('\n', hit) + 1;
    found.push_back(std::max(ls, from));
    from = block.find('\n', hit) + 1;
  }
  for (size_t at : taken_at)
    EXPECT_TRUE(std::find(found.begin(), found.end(), at) != found.end())
        << block.substr(at, block.find('\n', at) - at);
}

// What one saved-log read delivered: the records in order, the events they made, the counts.
struct Delivered {
  std::vector<std::string> records;
  std::vector<std::string> events;
  kmsg::ReadStats stats;
};

std::string describe(const KmsgRecordView& v) {
  std::string s = std::string(kmsg::to_string(v.format)) + "|" + std::to_string(v.priority) + "|" +
                  std::to_string(v.facility) + "|" + std::to_string(v.seq) + "|";
  if (v.time) s += std::to_string(v.time->time_since_epoch().count());
  s += "|";
  if (v.boot_offset_us) s += std::to_string(*v.boot_offset_us);
  return s + "|" + std::string(v.message);
}

// Reads `path` through every component's rules as `gpud scan` does: line by line behind
// want_line (the reference), or many lines at a time behind want_keywords.
Delivered read_through_rules(const std::string& path, bool sieved, bool mapped, unsigned threads) {
  Delivered d;
  kmsg::RuleMatcher m(all_kernel_log_rules());
  kmsg::ReadOptions o;
  o.buffer_bytes = 4096;  // lines of 4 KiB and more are cut
  o.max_line_bytes = 4096;
  o.map_round_bytes = 64 << 10;
  o.threads = threads;
  o.parse.boot_time = TimePoint{} + std::chrono::hours(24 * 365 * 50);
  o.parse.now = *o.parse.boot_time + std::chrono::hours(24);
  if (sieved) {
    o.want_keywords = m.literals();
    o.want_every_line = [&] { return m.pending(); };
  } else {
    o.want_line = [&](std::string_view raw) { return m.may_match(raw) || m.pending(); };
  }
  auto cb = [&](const KmsgRecordView& v) {
    d.records.push_back(describe(v));
    for (const auto& x : m.feed(v.message)) d.events.push_back(x.component + "/" + x.name);
  };
  Result<kmsg::ReadStats> r = make_error("not read");
  if (mapped) {
    r = kmsg::read_saved_log_file(path, cb, o);
  } else {
    std::ifstream in(path, std::ios::binary);
    r = kmsg::read_saved_log(in, cb, o);
  }
  EXPECT_TRUE(r.ok()) << path;
  if (r.ok()) d.stats = *r;
  return d;
}

void expect_same(const Delivered& a, const Delivered& b, const std::string& what) {
  EXPECT_EQ(a.records, b.records) << what;
  EXPECT_EQ(a.events, b.events) << what;
  EXPECT_EQ(a.stats.bytes, b.stats.bytes) << what;
  EXPECT_EQ(a.stats.lines, b.stats.lines) << what;
  EXPECT_EQ(a.stats.records, b.stats.records) << what;
  EXPECT_EQ(a.stats.truncated_lines, b.stats.truncated_lines) << what;
  EXPECT_EQ(a.stats.foreign_records, b.stats.foreign_records) << what;
}

// The sieve (many lines at a time, a mapped file on one or two threads, or a stream) delivers
// exactly what the line-by-line reader does, in the same order with the same counts: over every
// fixture, and over a log of them shuffled among ordinary lines, multi-line reports (OOM) across
// the threads' halves and the rounds, lines cut at the line cap with a rule's words before and
// after the cut, empty and CRLF lines, journal records whose message is bytes, and no final
// newline.
TEST(SavedLog, SievedReadsDeliverWhatLineByLineReadsDo) {
  std::vector<std::string> paths;
  for (const auto& e : std::filesystem::directory_iterator(fixture("")))
    paths.push_back(e.path().string());
  const std::vector<std::string> lines = fixture_lines();
  const std::string xid =
      "NVRM: Xid (PCI:0000:3b:00): 79, pid=1, name=x, GPU has fallen off the bus.";
  std::mt19937 rng(42);
  std::string log;
  while (log.size() < (3u << 20)) {
    const unsigned k = rng() % 100;
    if (k < 40) {
      log += "[  12.345678] usb 1-1: new high-speed USB device number 2 using xhci_hcd\n";
    } else if (k < 80) {
      log += lines[rng() % lines.size()] + "\n";
    } else if (k < 85) {  // an OOM report, its lines apart
      log += "python3 invoked oom-killer: gfp_mask=0x140cca(GFP_HIGHUSER_MOVABLE), order=0\n";
      log += "Mem-Info:\n\nsystemd[1]: Started Session 42 of user root.\r\n";
      log +=
          "oom-kill:constraint=CONSTRAINT_NONE,nodemask=(null),cpuset=/,mems_allowed=0,"
          "global_oom,task_memcg=/,task=python3,pid=98765,uid=1000\n";
      if (rng() % 2)
        log +=
            "Out of memory: Killed process 98765 (python3) total-vm:1kB, anon-rss:1kB, "
            "file-rss:0kB, shmem-rss:0kB, UID:1000 pgtables:2kB oom_score_adj:0\n";
    } else if (k < 88) {  // at the cap and past it, the rule's words before or after the cut
      const size_t pad = 4096 - 100 + rng() % 200;
      log += rng() % 2 ? xid + std::string(pad, 'x') + "\n" : std::string(pad, 'x') + xid + "\n";
    } else if (k < 89) {
      log += std::string(4096 * (2 + rng() % 3), 'y') + "\n";
    } else if (k < 92) {
      log += R"({"_TRANSPORT":"kernel","MESSAGE":[78,86,82,77,58,32,88,105,100,32,40,80,67,73,58,)"
             R"(48,48,48,48,58,51,98,58,48,48,41,58,32,55,57,44,32,112,105,100,61,49,44,32]})"
             "\n";
    } else {
      log += "\n";
    }
  }
  log += xid;  // no final newline
  char tmpl[] = "/tmp/gpud-sieve-XXXXXX";
  const int fd = mkstemp(tmpl);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::write(fd, log.data(), log.size()), static_cast<ssize_t>(log.size()));
  ::close(fd);
  paths.push_back(tmpl);
  for (const std::string& p : paths) {
    const Delivered want = read_through_rules(p, false, false, 1);
    expect_same(want, read_through_rules(p, false, true, 1), p + " line by line, mapped");
    expect_same(want, read_through_rules(p, true, false, 1), p + " sieved stream");
    expect_same(want, read_through_rules(p, true, true, 1), p + " sieved, mapped");
    expect_same(want, read_through_rules(p, true, true, 2), p + " sieved, mapped, two threads");
    if (p == tmpl) {
      EXPECT_GT(want.stats.truncated_lines, 10u);
      EXPECT_GT(want.events.size(), 100u);
      EXPECT_GT(std::count(want.events.begin(), want.events.end(), "memory/OOM"), 10);
    }
  }
  std::remove(tmpl);
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
