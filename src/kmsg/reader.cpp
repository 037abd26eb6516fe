#include "kmsg/reader.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <vector>

#include "core/log.h"
#include "kmsg/rules.h"

namespace gpud::kmsg {

bool kernel_record(const KmsgRecordView& r) {
  constexpr int kKernFacility = 0;  // LOG_KERN >> 3
  return r.facility < 0 || r.facility == kKernFacility || r.message.ends_with(kInjectedMarker);
}

namespace {

// Splits `fill` bytes into lines. Returns a read error only.
template <typename ReadFn>
Result<ReadStats> read_lines(ReadFn&& read_some, const RecordViewCallback& cb,
                             const ReadOptions& opts) {
  ReadStats st;
  const size_t cap = std::max<size_t>(opts.buffer_bytes, 4096);
  std::vector<char> buf(cap);
  size_t have = 0;        // bytes in buf
  bool skipping = false;  // inside an over-long line, dropping until '\n'
  auto emit = [&](std::string_view line) {
    ++st.lines;
    if (opts.want_line && !opts.want_line(line) && !message_is_encoded(line)) return;
    auto v = parse_line_view(line, opts.parse);
    if (!v) return;
    if (!kernel_record(*v)) {
      ++st.foreign_records;
      return;
    }
    ++st.records;
    cb(*v);
  };
  for (;;) {
    if (have == buf.size()) {
      // A line fills the buffer: grow up to the line cap, then cut it.
      if (buf.size() < opts.max_line_bytes) {
        buf.resize(std::min(buf.size() * 2, std::max(opts.max_line_bytes, cap)));
      } else {
        emit(std::string_view(buf.data(), have));
        ++st.truncated_lines;
        have = 0;
        skipping = true;
      }
    }
    const ssize_t n = read_some(buf.data() + have, buf.size() - have);
    if (n < 0) return make_error(std::string("read: ") + std::strerror(errno));
    if (n == 0) break;
    st.bytes += static_cast<uint64_t>(n);
    const char* p = buf.data();
    const char* end = buf.data() + have + n;
    const char* scan = buf.data() + have;
    for (;;) {
      const char* nl =
          static_cast<const char*>(memchr(scan, '\n', static_cast<size_t>(end - scan)));
      if (nl == nullptr) break;
      if (skipping) {
        skipping = false;
      } else {
        emit(std::string_view(p, static_cast<size_t>(nl - p)));
      }
      p = nl + 1;
      scan = p;
    }
    have = static_cast<size_t>(end - p);
    if (skipping) {
      have = 0;  // still inside the over-long line
    } else if (p != buf.data() && have > 0) {
      std::memmove(buf.data(), p, have);
    }
  }
  if (have > 0 && !skipping) emit(std::string_view(buf.data(), have));
  return st;
}

}  // namespace

Result<ReadStats> read_saved_log(int fd, const RecordViewCallback& cb, const ReadOptions& opts) {
  return read_lines(
      [fd](char* p, size_t n) -> ssize_t {
        for (;;) {
          const ssize_t r = ::read(fd, p, n);
          if (r < 0 && errno == EINTR) continue;
          return r;
        }
      },
      cb, opts);
}

Result<ReadStats> read_saved_log(std::istream& in, const RecordViewCallback& cb,
                                 const ReadOptions& opts) {
  return read_lines(
      [&in](char* p, size_t n) -> ssize_t {
        in.read(p, static_cast<std::streamsize>(n));
        const auto got = in.gcount();
        if (got == 0 && in.bad()) {
          errno = EIO;
          return -1;
        }
        return static_cast<ssize_t>(got);
      },
      cb, opts);
}

Result<ReadStats> read_saved_log_file(const std::string& path, const RecordViewCallback& cb,
                                      const ReadOptions& opts) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return make_error("open " + path + ": " + std::strerror(errno));
  auto r = read_saved_log(fd, cb, opts);
  ::close(fd);
  return r;
}

// ---------------------------------------------------------------------------------------------

KmsgFollower::KmsgFollower(Options opts, Callback cb) : opts_(std::move(opts)), cb_(std::move(cb)) {
  if (!opts_.parse.boot_time) opts_.parse.boot_time = estimate_boot_time();
}

KmsgFollower::~KmsgFollower() {
  stop();
  for (int& fd : stop_pipe_) {
    if (fd >= 0) ::close(fd);
    fd = -1;
  }
}

namespace {
constexpr int kWakeTimer = 0, kWakePoll = 1, kWakeInotify = 2;
}  // namespace

std::string_view KmsgFollower::wake_source() const {
  switch (wake_.load()) {
    case kWakePoll: return "poll";
    case kWakeInotify: return "inotify";
    default: return "timer";
  }
}

void KmsgFollower::watch_file() {
  if (inotify_fd_ >= 0) {
    ::close(inotify_fd_);
    inotify_fd_ = -1;
  }
  struct stat st {};
  if (fd_ < 0 || ::fstat(fd_, &st) != 0) return;
  if (S_ISCHR(st.st_mode)) {  // /dev/kmsg: poll() says when a record is there
    wake_ = kWakePoll;
    return;
  }
  wake_ = kWakeTimer;
  if (!S_ISREG(st.st_mode)) return;  // a FIFO at EOF (no writer) is always readable: timer
  // A regular file is always readable, so poll() on it says nothing; inotify says when it grew.
  // The watch is made before the first read, so an append after it is never missed.
  const int in = ::inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  if (in < 0) {
    logger("kmsg")->warn("inotify for {}: {}; re-reading it every {} ms", opts_.path,
                         std::strerror(errno), opts_.idle_poll.count());
    return;
  }
  if (::inotify_add_watch(in, opts_.path.c_str(), IN_MODIFY) < 0) {
    logger("kmsg")->warn("inotify watch of {}: {}; re-reading it every {} ms", opts_.path,
                         std::strerror(errno), opts_.idle_poll.count());
    ::close(in);
    return;
  }
  inotify_fd_ = in;
  wake_ = kWakeInotify;
}

bool KmsgFollower::wait_for_more() {
  if (inotify_fd_ < 0) return wait(opts_.idle_poll, false);
  struct pollfd fds[2] = {{stop_pipe_[0], POLLIN, 0}, {inotify_fd_, POLLIN, 0}};
  const int r = ::poll(fds, 2, -1);  // no timer: every change of the file is an event
  if (stopping_.load()) return false;
  if (r > 0 && (fds[0].revents & POLLIN)) return false;
  // The events only say "changed": drain them, then read what was added.
  alignas(struct inotify_event) char events[4096];
  while (::read(inotify_fd_, events, sizeof events) > 0) {
  }
  return true;
}

Result<void> KmsgFollower::start() {
  if (thread_.joinable()) return make_error("kmsg follower already started");
  fd_ = ::open(opts_.path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd_ < 0) return make_error("open " + opts_.path + ": " + std::strerror(errno));
  if (stop_pipe_[0] < 0 && ::pipe2(stop_pipe_, O_CLOEXEC | O_NONBLOCK) != 0) {
    ::close(fd_);
    fd_ = -1;
    return make_error(std::string("pipe: ") + std::strerror(errno));
  }
  watch_file();
  stopping_ = false;
  thread_ = std::thread([this] { run(); });
  return {};
}

void KmsgFollower::stop() {
  if (!thread_.joinable()) return;
  stopping_ = true;
  const char b = 'x';
  (void)!::write(stop_pipe_[1], &b, 1);
  thread_.join();
  char drain[16];
  while (::read(stop_pipe_[0], drain, sizeof(drain)) > 0) {
  }
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  if (inotify_fd_ >= 0) ::close(inotify_fd_);
  inotify_fd_ = -1;
}

bool KmsgFollower::wait(std::chrono::milliseconds timeout, bool on_fd) {
  struct pollfd fds[2] = {{stop_pipe_[0], POLLIN, 0}, {fd_, POLLIN, 0}};
  const int n = on_fd && fd_ >= 0 ? 2 : 1;
  const int r = ::poll(fds, static_cast<nfds_t>(n), static_cast<int>(timeout.count()));
  if (stopping_.load()) return false;
  if (r > 0 && (fds[0].revents & POLLIN)) return false;
  return true;
}

void KmsgFollower::deliver(std::string_view line) {
  // The follower outlives any one record: a record that makes the parser or the consumer throw
  // is counted and skipped, never allowed to end the thread (which would end the process).
  try {
    auto v = parse_line_view(line, opts_.parse);
    if (!v) return;
    if (!kernel_record(*v)) {
      ++foreign_records_;
      return;
    }
    ++records_;
    cb_(to_record(*v));
  } catch (const std::exception& e) {
    record_error(e.what());
  } catch (...) {
    record_error("unknown exception");
  }
}

void KmsgFollower::record_error(std::string_view what) {
  const uint64_t n = record_errors_.fetch_add(1) + 1;
  if (auto left_out = record_error_log_.admit())  // at most one line a minute
    logger("kmsg")->warn("kernel-log record skipped ({} so far, {} not logged since the last): {}",
                         n, *left_out, what);
}

void KmsgFollower::run() {
  // /dev/kmsg records are at most ~8 KiB with their dictionary; files may hold anything.
  std::vector<char> buf(64 * 1024);
  auto backoff = opts_.min_backoff;
  bool error_logged = false;
  while (!stopping_.load()) {
    if (fd_ < 0) {
      fd_ = ::open(opts_.path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
      if (fd_ < 0) {
        ++errors_;
        if (!error_logged) logger("kmsg")->warn("open {}: {}", opts_.path, std::strerror(errno));
        error_logged = true;
        if (!wait(backoff, false)) break;
        backoff = std::min(backoff * 2, opts_.max_backoff);
        continue;
      }
      watch_file();  // the path may now be another file
    }
    const ssize_t n = ::read(fd_, buf.data(), buf.size());
    if (n > 0) {
      backoff = opts_.min_backoff;
      error_logged = false;
      pending_.append(buf.data(), static_cast<size_t>(n));
      size_t start = 0;
      for (;;) {
        const size_t nl = pending_.find('\n', start);
        if (nl == std::string::npos) break;
        deliver(std::string_view(pending_).substr(start, nl - start));
        start = nl + 1;
      }
      pending_.erase(0, start);
      if (pending_.size() > kMaxMessageBytes * 2) {  // no newline in sight: cut
        deliver(pending_);
        pending_.clear();
      }
      continue;
    }
    if (n == 0) {  // EOF of a file or FIFO: the ring is read; wait for more
      ring_done_ = true;
      if (!wait_for_more()) break;
      continue;
    }
    const int err = errno;
    if (err == EINTR) continue;
    if (err == EPIPE) {  // the ring overwrote records we had not read yet
      ++overruns_;
      continue;
    }
    if (err == EAGAIN || err == EWOULDBLOCK) {
      ring_done_ = true;
      // Until a record arrives or stop() writes to the pipe: no timeout, so an idle daemon does
      // not wake once a second for nothing.
      if (!wait(std::chrono::milliseconds(-1), true)) break;
      continue;
    }
    ++errors_;
    if (!error_logged) logger("kmsg")->warn("read {}: {}", opts_.path, std::strerror(err));
    error_logged = true;
    ::close(fd_);
    fd_ = -1;
    if (!wait(backoff, false)) break;
    backoff = std::min(backoff * 2, opts_.max_backoff);
  }
}

Result<ReadStats> read_kmsg_ring(const std::string& path, const ParseOptions& parse,
                                 const std::function<void(const KmsgRecord&)>& cb) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return make_error("open " + path + ": " + std::strerror(errno));
  ReadStats st;
  std::vector<char> buf(16 * 1024);
  std::string pending;  // regular files (tests) give chunks of several lines
  // /dev/kmsg records are at most ~8 KiB with their dictionary; a file may hold a line of any
  // length, which is cut here (the message is capped at kMaxMessageBytes anyway).
  constexpr size_t kMaxLineBytes = kMaxMessageBytes * 2;
  bool skipping = false;
  auto emit = [&](std::string_view line) {
    ++st.lines;
    auto v = parse_line_view(line, parse);
    if (!v) return;
    if (!kernel_record(*v)) {
      ++st.foreign_records;
      return;
    }
    ++st.records;
    cb(to_record(*v));
  };
  for (;;) {
    const ssize_t n = ::read(fd, buf.data(), buf.size());
    if (n < 0) {
      if (errno == EINTR || errno == EPIPE) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      const int err = errno;
      ::close(fd);
      return make_error("read " + path + ": " + std::strerror(err));
    }
    if (n == 0) break;
    st.bytes += static_cast<uint64_t>(n);
    std::string_view chunk(buf.data(), static_cast<size_t>(n));
    if (skipping) {  // the rest of a line already cut: dropped up to its newline
      const size_t nl = chunk.find('\n');
      if (nl == std::string_view::npos) continue;
      chunk.remove_prefix(nl + 1);
      skipping = false;
    }
    pending.append(chunk);
    size_t start = 0;
    for (size_t nl; (nl = pending.find('\n', start)) != std::string::npos; start = nl + 1)
      emit(std::string_view(pending).substr(start, nl - start));
    pending.erase(0, start);
    if (pending.size() > kMaxLineBytes) {  // no newline in sight: cut, as the follower does
      emit(std::string_view(pending).substr(0, kMaxLineBytes));
      ++st.truncated_lines;
      pending.clear();
      skipping = true;
    }
  }
  if (!pending.empty() && !skipping) emit(pending);
  ::close(fd);
  return st;
}

}  // namespace gpud::kmsg
