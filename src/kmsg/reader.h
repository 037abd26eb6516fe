// Kernel-log readers: a fast streaming reader for saved logs and stdin, and KmsgFollower, the one
// thread that reads /dev/kmsg (ring buffer first, then follows).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <istream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/log.h"
#include "core/result.h"
#include "kmsg/parser.h"
#include "kmsg/prefilter.h"
#include "kmsg/record.h"

namespace gpud::kmsg {

struct ReadStats {
  uint64_t bytes = 0;
  uint64_t lines = 0;
  uint64_t records = 0;
  uint64_t truncated_lines = 0;  // lines longer than the line cap; the rest was dropped
  uint64_t foreign_records = 0;  // records a process wrote, not the kernel (kernel_record)
};

// Whether the kernel wrote a record: its facility is kern (0), or its line does not say (dmesg
// and journalctl -k text), or it is gpud's own injected fault (it ends in kInjectedMarker; the
// kernel files it under the facility its writer gave, as it files every write to /dev/kmsg, and
// the matcher marks its events injected). Any other record was written to /dev/kmsg by a process
// (a user's `logger --kmsg`, systemd): an Xid's text there is not the driver's. Every reader
// below delivers only these.
bool kernel_record(const KmsgRecordView& r);

// Called per record; the view (and its message) is valid only during the call.
using RecordViewCallback = std::function<void(const KmsgRecordView&)>;

struct ReadOptions {
  ParseOptions parse;
  size_t buffer_bytes = 1 << 20;
  // Lines longer than this are cut (the message is capped at kMaxMessageBytes anyway).
  size_t max_line_bytes = 1 << 20;
  // When set, lines it rejects (given raw, prefix and all) are neither parsed nor delivered: a
  // cheap prefilter saves the parse of the ~all lines no rule wants.
  std::function<bool(std::string_view raw_line)> want_line;
  // The faster form of want_line, which it replaces when not empty: a line is wanted when it holds
  // one of these keywords (the rules' literals, prefix and all), when its message is encoded
  // (message_is_encoded), or while want_every_line() (optional) says so, as it does while a
  // multi-line rule is open. Keywords are looked for many lines at a time: a line no rule wants
  // costs no call, no parse and no copy.
  std::vector<Literal> want_keywords;
  std::function<bool()> want_every_line;
  // With want_keywords, read_saved_log_file maps a regular file and looks for the wanted lines of
  // its two halves on this many threads (at most 2); records are delivered on the caller's thread,
  // in the file's order, exactly as with one.
  unsigned threads = 1;
  // A mapped file is sieved in rounds of this many bytes (then delivered), which bounds the
  // offsets of wanted lines kept; tests make it small.
  size_t map_round_bytes = size_t{32} << 20;
};

// Streams a saved log (any mix of the formats of record.h) in large reads, with no copy per
// line. Errors are read errors only; odd content never fails.
[[nodiscard]] Result<ReadStats> read_saved_log(int fd, const RecordViewCallback& cb,
                                               const ReadOptions& opts = {});
[[nodiscard]] Result<ReadStats> read_saved_log(std::istream& in, const RecordViewCallback& cb,
                                               const ReadOptions& opts = {});
// A regular file read with want_keywords is mapped: cut short while it is read, it raises SIGBUS,
// whose handling is the caller's (`gpud scan` ends with a message naming the log, exit 2).
[[nodiscard]] Result<ReadStats> read_saved_log_file(const std::string& path,
                                                    const RecordViewCallback& cb,
                                                    const ReadOptions& opts = {});

// Reads the /dev/kmsg ring buffer once, non-blocking, until EAGAIN/EOF (`gpud scan`). EPIPE
// (records overwritten while reading) is skipped. An error when the path cannot be opened.
[[nodiscard]] Result<ReadStats> read_kmsg_ring(const std::string& path, const ParseOptions& parse,
                                               const std::function<void(const KmsgRecord&)>& cb);

// Follows a kmsg-like path on its own thread. /dev/kmsg gives one record per read(); a regular
// file or FIFO (tests) gives arbitrary chunks: both are split into lines the same way. The thread
// sleeps until there is something to read: /dev/kmsg is pollable, a regular file is watched with
// inotify (IN_MODIFY), and only a FIFO, or a file inotify cannot watch, is re-read on a timer.
class KmsgFollower {
 public:
  struct Options {
    std::string path = "/dev/kmsg";
    ParseOptions parse;  // boot_time defaults to estimate_boot_time()
    // Re-check interval at EOF where nothing wakes the thread: a FIFO, or a regular file when
    // inotify is unavailable (no instance left, a filesystem without it).
    std::chrono::milliseconds idle_poll{200};
    std::chrono::milliseconds min_backoff{500};  // after an open/read error
    std::chrono::milliseconds max_backoff{30000};
  };
  using Callback = std::function<void(const KmsgRecord&)>;

  KmsgFollower(Options opts, Callback cb);
  ~KmsgFollower();
  KmsgFollower(const KmsgFollower&) = delete;
  KmsgFollower& operator=(const KmsgFollower&) = delete;

  // Opens the path and starts the thread; an error if the first open fails.
  [[nodiscard]] Result<void> start();
  // Stops and joins the thread promptly (the thread polls a stop pipe).
  void stop();

  bool ring_done() const { return ring_done_.load(); }  // the first EAGAIN/EOF was reached
  // How the thread learns of new records: "poll" (/dev/kmsg), "inotify" (a regular file) or
  // "timer" (idle_poll: a FIFO, or inotify unavailable). Set by start().
  std::string_view wake_source() const;
  uint64_t records() const { return records_.load(); }
  uint64_t overruns() const { return overruns_.load(); }  // EPIPE: records lost to the ring
  uint64_t errors() const { return errors_.load(); }
  // Records skipped because a process, not the kernel, wrote them (kernel_record).
  uint64_t foreign_records() const { return foreign_records_.load(); }
  // Records skipped because parsing or the callback threw.
  uint64_t record_errors() const { return record_errors_.load(); }

 private:
  void run();
  bool wait(std::chrono::milliseconds timeout, bool on_fd);  // false: stop requested
  // At EOF of a file or FIFO: until inotify reports a change (or idle_poll passes); false: stop.
  bool wait_for_more();
  void watch_file();  // the inotify watch, when the path is a regular file
  void deliver(std::string_view line);
  void record_error(std::string_view what);

  Options opts_;
  Callback cb_;
  int fd_ = -1;
  int stop_pipe_[2] = {-1, -1};
  int inotify_fd_ = -1;       // watches a regular file's changes; -1 otherwise
  std::atomic<int> wake_{0};  // 0 timer, 1 poll, 2 inotify
  std::thread thread_;
  std::string pending_;
  std::atomic<bool> ring_done_{false};
  std::atomic<bool> stopping_{false};
  std::atomic<uint64_t> records_{0};
  std::atomic<uint64_t> overruns_{0};
  std::atomic<uint64_t> errors_{0};
  std::atomic<uint64_t> record_errors_{0};
  std::atomic<uint64_t> foreign_records_{0};
  LogRateLimiter record_error_log_{std::chrono::minutes(1)};
};

}  // namespace gpud::kmsg
