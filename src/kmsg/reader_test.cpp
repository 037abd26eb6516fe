#include "kmsg/reader.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <map>
#include <mutex>
#include <random>
#include <sstream>
#include <stdexcept>

#include "kmsg/deduper.h"
#include "kmsg/rules.h"
#include "kmsg/writer.h"

#ifndef GPUD_SOURCE_DIR
#define GPUD_SOURCE_DIR "."
#endif

namespace gpud::kmsg {
namespace {

std::string fixture(const std::string& name) {
  return std::string(GPUD_SOURCE_DIR) + "/testing/fixtures/kmsg/" + name;
}

// prefix-forms.log: one lost-GPU line in each syslog and journal form gpud reads (with and
// without host name, RFC 3164 and 5424, ISO 8601, dmesg -T and -H, journalctl short-precise and
// json, German and French month names, Talos). Behind a prefilter that wants the Xid's words,
// every line is delivered with the driver's message and the time its prefix gives; the JSON line
// whose message is bytes reaches the parser though its raw text has no such words.
TEST(SavedLog, EverySyslogAndJournalPrefixFormGivesTheMessageAndItsTime) {
  ReadOptions o;
  o.parse.year = 2026;
  o.want_line = [](std::string_view raw) { return raw.find("NVRM: Xid") != std::string::npos; };
  std::map<Format, int> formats;
  int n = 0;
  auto r = read_saved_log_file(
      fixture("prefix-forms.log"),
      [&](const KmsgRecordView& v) {
        ++n;
        ++formats[v.format];
        EXPECT_EQ(v.message,
                  "NVRM: Xid (PCI:0000:3b:00): 79, pid=1, name=x, GPU has fallen off the bus.")
            << "line " << n << " (" << to_string(v.format) << ")";
        EXPECT_TRUE(v.time) << "line " << n << " (" << to_string(v.format) << ")";
      },
      o);
  ASSERT_TRUE(r);
  EXPECT_EQ(n, 17);
  EXPECT_EQ(r->records, 17u);
  EXPECT_EQ(formats[Format::kBare], 0);
  for (Format f : {Format::kSyslog, Format::kSyslogIso, Format::kSyslog5424, Format::kDmesgCtime,
                   Format::kDmesgHuman, Format::kJournalJson, Format::kTalos})
    EXPECT_GT(formats[f], 0) << to_string(f);
}

TEST(SavedLog, RawKmsgTimesAndContinuations) {
  ReadOptions o;
  o.parse.boot_time = TimePoint{};
  int n = 0;
  std::ifstream in(fixture("raw-kmsg.log"));
  auto r = read_saved_log(
      in,
      [&](const KmsgRecordView& v) {
        EXPECT_EQ(v.format, Format::kRawKmsg);
        ASSERT_TRUE(v.time);
        ++n;
      },
      o);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(n, 48);
  EXPECT_EQ(r->lines, 50u);
}

TEST(SavedLog, LongLinesAreCutNotFatal) {
  std::string data = std::string(3 << 20, 'a') + "\nshort\n";
  std::istringstream in(data);
  std::vector<size_t> sizes;
  ReadOptions o;
  o.buffer_bytes = 4096;
  auto r = read_saved_log(
      in, [&](const KmsgRecordView& v) { sizes.push_back(v.message.size()); }, o);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->truncated_lines, 1u);
  ASSERT_EQ(sizes.size(), 2u);
  EXPECT_LE(sizes[0], kMaxMessageBytes);
  EXPECT_EQ(sizes[1], 5u);
}

class TempFile {
 public:
  TempFile() {
    char tmpl[] = "/tmp/gpud-kmsg-XXXXXX";
    const int fd = mkstemp(tmpl);
    EXPECT_GE(fd, 0);
    close(fd);
    path_ = tmpl;
  }
  ~TempFile() { unlink(path_.c_str()); }
  const std::string& path() const { return path_; }
  void append(const std::string& s) { std::ofstream(path_, std::ios::app) << s; }

 private:
  std::string path_;
};

// dmesg -H dates a minute's first line; each other line carries the time since the line before:
// it is dated from the dated line before it plus every delta since, its own included, whether
// the lines between are delivered or not. A line of another form breaks the chain. Line by line,
// and many lines at a time (a stream, a mapped file on one thread or two), alike.
TEST(SavedLog, DmesgHumanDeltaLinesAreDatedFromTheDatedLineBefore) {
  const std::string xid =
      "NVRM: Xid (PCI:0000:3b:00): 79, pid=1, name=x, GPU has fallen off the bus.";
  std::string log =
      "[Dec 6 22:21] usb 1-1: new high-speed USB device number 2 using xhci_hcd\n"
      "[  +0.500000] " +
      xid +
      "\n"
      "[  +1.250000] usb 1-1: new high-speed USB device number 3 using xhci_hcd\n"
      "[  +0.250000] " +
      xid +
      "\n"
      "[Dec 6 22:22] usb 1-1: new high-speed USB device number 4 using xhci_hcd\n"
      "[  +2.000000] " +
      xid +
      "\n"
      "usb 1-1: a line of another form\n"
      "[  +1.000000] " +
      xid + "\n";
  // Enough ordinary lines after it for the two threads, then the chain again.
  for (int i = 0; i < 40000; ++i) log += "[  +0.000001] usb 1-1: new device\n";
  log += "[  +0.000002] " + xid;
  TempFile f;
  f.append(log);
  ParseOptions parse;
  parse.year = 2026;
  const TimePoint t21 = *parse_line("[Dec 6 22:21] x", parse)->time;
  const TimePoint t22 = *parse_line("[Dec 6 22:22] x", parse)->time;
  const std::vector<std::optional<TimePoint>> want = {
      t21 + std::chrono::milliseconds(500), t21 + std::chrono::milliseconds(2000),
      t22 + std::chrono::seconds(2), std::nullopt,
      std::nullopt};  // the chain broken before the last two
  for (int mode = 0; mode < 4; ++mode) {
    ReadOptions o;
    o.parse = parse;
    if (mode == 0) {
      o.want_line = [](std::string_view raw) { return raw.find("NVRM: Xid") != std::string::npos; };
    } else {
      o.want_keywords = {{"NVRM: Xid"}};
      o.threads = mode == 3 ? 2 : 1;
      o.map_round_bytes = 64 << 10;
    }
    std::vector<std::optional<TimePoint>> got;
    auto cb = [&](const KmsgRecordView& v) { got.push_back(v.time); };
    Result<ReadStats> r = make_error("not read");
    if (mode == 1) {
      std::ifstream in(f.path());
      r = read_saved_log(in, cb, o);
    } else {
      r = read_saved_log_file(f.path(), cb, o);
    }
    ASSERT_TRUE(r.ok()) << mode;
    EXPECT_EQ(got, want) << "mode " << mode;
  }
}

bool wait_for(const std::function<bool()>& f) {
  for (int i = 0; i < 500 && !f(); ++i) usleep(10000);
  return f();
}

// `gpud scan` reads the ring (or a file standing in for it) with the same line cap as the follower:
// a 3 MiB line without a newline is cut once, its rest dropped, and the next line read.
TEST(KmsgRing, LongLinesAreCutOnceAndTheNextLineIsRead) {
  TempFile f;
  f.append("6,1,100,-;" + std::string(3 << 20, 'a') + "\n6,2,200,-;short\n");
  std::vector<size_t> sizes;
  auto r = read_kmsg_ring(f.path(), ParseOptions{TimePoint{}, 0, {}},
                          [&](const KmsgRecord& rec) { sizes.push_back(rec.message.size()); });
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->truncated_lines, 1u);
  ASSERT_EQ(sizes.size(), 2u);
  EXPECT_LE(sizes[0], kMaxMessageBytes);
  EXPECT_EQ(sizes[1], 5u);
}

// A follower of a test file that re-checks it every 20 ms.
KmsgFollower::Options fast_follower_options(const std::string& path) {
  KmsgFollower::Options o;
  o.path = path;
  o.idle_poll = std::chrono::milliseconds(20);
  o.parse.boot_time = TimePoint{};
  return o;
}

TEST(KmsgFollower, ReadsRingThenFollowsAndStopsPromptly) {
  TempFile f;
  f.append("6,1,100,-;first\n SUBSYSTEM=pci\n6,2,200,-;second\n");
  std::atomic<int> n{0};
  std::vector<std::string> seen;
  std::mutex mu;
  KmsgFollower fol(fast_follower_options(f.path()), [&](const KmsgRecord& r) {
    std::lock_guard<std::mutex> l(mu);
    seen.push_back(r.message);
    ++n;
  });
  ASSERT_TRUE(fol.start().ok());
  ASSERT_TRUE(wait_for([&] { return n.load() == 2 && fol.ring_done(); }));
  f.append("3,3,300,-;NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.\n");
  ASSERT_TRUE(wait_for([&] { return n.load() == 3; }));
  const auto t0 = std::chrono::steady_clock::now();
  fol.stop();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(500));
  EXPECT_EQ(seen[2].substr(0, 10), "NVRM: Xid ");
  EXPECT_EQ(fol.records(), 3u);
}

// A record whose consumer throws is counted and skipped; the thread goes on with the next one.
TEST(KmsgFollower, ThrowingConsumerSkipsTheRecordAndKeepsFollowing) {
  TempFile f;
  f.append("6,1,100,-;poison\n6,2,200,-;second\n");
  std::atomic<int> n{0};
  KmsgFollower::Options o;
  o.path = f.path();
  o.idle_poll = std::chrono::milliseconds(20);
  o.parse.boot_time = TimePoint{};
  KmsgFollower fol(o, [&](const KmsgRecord& r) {
    if (r.message == "poison") throw std::out_of_range("stoll");
    ++n;
  });
  ASSERT_TRUE(fol.start().ok());
  ASSERT_TRUE(wait_for([&] { return n.load() == 1 && fol.ring_done(); }));
  f.append("6,3,300,-;third\n");
  ASSERT_TRUE(wait_for([&] { return n.load() == 2; }));
  fol.stop();
  EXPECT_EQ(fol.record_errors(), 1u);
}

// What a process writes to /dev/kmsg is filed under its facility (user when it names none; never
// kern): only the kernel's records are delivered, and gpud's own injected faults.
TEST(KmsgFollower, DeliversOnlyTheKernelsRecordsAndInjectedFaults) {
  const std::string xid =
      "NVRM: Xid (PCI:0000:5d:00): 79, pid=1, name=x, GPU has fallen off the bus.";
  TempFile f;
  f.append("11,1,100,-;" + xid + "\n" +  // LOG_USER | LOG_ERR: a process's write
           "3,2,200,-;" + xid + "\n" +   // the kernel's
           "<14>" + xid + "\n" +         // a followed file's user-facility line
           "<3>kernel line\n" +          // a followed file's kernel line
           "43,3,300,-;" + xid + std::string(kInjectedMarker) + "\n" +  // gpud inject-fault
           "43,4,400,-;" + xid + "\n");  // the same facility, unmarked
  std::vector<std::string> seen;
  KmsgFollower fol(fast_follower_options(f.path()),
                   [&](const KmsgRecord& r) { seen.push_back(r.message); });
  ASSERT_TRUE(fol.start().ok());
  ASSERT_TRUE(wait_for([&] { return fol.ring_done() && fol.foreign_records() == 3; }));
  fol.stop();  // joins the thread: `seen` is read after it
  ASSERT_EQ(seen.size(), 3u);
  EXPECT_EQ(seen[0], xid);
  EXPECT_EQ(seen[1], "kernel line");
  EXPECT_EQ(seen[2], xid + std::string(kInjectedMarker));
  EXPECT_EQ(fol.records(), 3u);
}

// `gpud scan` reads the ring, and saved raw or `dmesg -r` logs, the same way; dmesg text, which
// names no facility, is read whole.
TEST(KmsgRing, SavedLogsAndTheRingDeliverOnlyTheKernelsRecords) {
  TempFile f;
  f.append("11,1,100,-;from a process\n4,2,200,-;from the kernel\n");
  std::vector<std::string> ring;
  auto r = read_kmsg_ring(f.path(), ParseOptions{TimePoint{}, 0, {}},
                          [&](const KmsgRecord& rec) { ring.push_back(rec.message); });
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(ring, std::vector<std::string>{"from the kernel"});
  EXPECT_EQ(r->foreign_records, 1u);

  std::istringstream in(
      "<14>from a process\n<4>from the kernel\n[  12.5] dmesg text\nJan 01 00:00:00 h kernel: "
      "journal\n");
  std::vector<std::string> saved;
  auto s = read_saved_log(in, [&](const KmsgRecordView& v) { saved.emplace_back(v.message); });
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(saved, (std::vector<std::string>{"from the kernel", "dmesg text", "journal"}));
  EXPECT_EQ(s->foreign_records, 1u);
}

// A followed regular file wakes the thread when it grows (inotify), not on a timer: with the
// timer set to an hour, each appended record is still delivered (within wait_for's 5 s, which
// only a lost wake-up could exceed), and a FIFO, which inotify does not serve, says "timer".
TEST(KmsgFollower, AnAppendedLineWakesTheFollowerWithoutATimer) {
  TempFile f;
  f.append("6,1,100,-;ring\n");
  std::atomic<int> n{0};
  KmsgFollower::Options o = fast_follower_options(f.path());
  o.idle_poll = std::chrono::hours(1);
  KmsgFollower fol(o, [&](const KmsgRecord&) { ++n; });
  ASSERT_TRUE(fol.start().ok());
  EXPECT_EQ(fol.wake_source(), "inotify");
  ASSERT_TRUE(wait_for([&] { return n.load() == 1 && fol.ring_done(); }));
  for (int i = 2; i <= 4; ++i) {
    f.append("3," + std::to_string(i) + ",200,-;NVRM: Xid (PCI:0000:3b:00): 79\n");
    ASSERT_TRUE(wait_for([&] { return n.load() == i; })) << "record " << i << " not delivered";
  }
  const auto t0 = std::chrono::steady_clock::now();
  fol.stop();  // the stop pipe wakes the inotify wait too
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(500));

  const std::string fifo = f.path() + ".fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  KmsgFollower on_fifo(fast_follower_options(fifo), [](const KmsgRecord&) {});
  ASSERT_TRUE(on_fifo.start().ok());
  EXPECT_EQ(on_fifo.wake_source(), "timer");
  on_fifo.stop();
  ::unlink(fifo.c_str());
}

TEST(KmsgFollower, MissingPathFailsStart) {
  KmsgFollower::Options o;
  o.path = "/nonexistent/kmsg";
  KmsgFollower fol(o, [](const KmsgRecord&) {});
  EXPECT_FALSE(fol.start().ok());
}

TEST(KmsgWriter, FormatsAndWrites) {
  EXPECT_EQ(format_kmsg_write("a\tb", 6, kLogSyslog), "<46>a b\n");
  EXPECT_EQ(format_kmsg_write("x", 3, 0), "<3>x\n");
  const auto long_line = format_kmsg_write(std::string(2000, 'y'), 6, 0);
  EXPECT_EQ(long_line.size(), 3 + kMaxWriteBytes + 1);
  EXPECT_EQ(long_line.substr(long_line.size() - 4), "...\n");
  TempFile f;
  WriteOptions o;
  o.path = f.path();
  ASSERT_TRUE(write_kmsg(xid_line(79, "0000:3b:00.0"), o).ok());
  std::ifstream in(f.path());
  std::string got;
  std::getline(in, got);
  EXPECT_EQ(got,
            "<46>NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen "
            "off the bus.");
  o.path = "/nonexistent/dir/kmsg";
  auto r = write_kmsg("x", o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("/nonexistent/dir/kmsg"), std::string::npos);
}

TEST(Deduper, SameMessageWithinWindowIsOneEvent) {
  Deduper d(std::chrono::seconds(60), 4);
  const TimePoint t0{};
  EXPECT_FALSE(d.is_duplicate("cpu", "x", "m", t0));
  EXPECT_TRUE(d.is_duplicate("cpu", "x", "m", t0 + std::chrono::seconds(59)));
  EXPECT_FALSE(d.is_duplicate("cpu", "y", "m", t0 + std::chrono::seconds(1)));
  EXPECT_FALSE(d.is_duplicate("cpu", "x", "m", t0 + std::chrono::seconds(61)));
  for (int i = 0; i < 100; ++i) (void)d.is_duplicate("k" + std::to_string(i), t0);
  EXPECT_LE(d.size(), 4u);
  Deduper w(std::chrono::seconds(300));
  EXPECT_FALSE(w.is_duplicate("a", t0));
  EXPECT_TRUE(w.is_duplicate("a", t0 + std::chrono::seconds(200)));
}

}  // namespace
}  // namespace gpud::kmsg
