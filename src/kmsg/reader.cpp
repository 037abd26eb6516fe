#include "kmsg/reader.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/inotify.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <ratio>
#include <type_traits>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "core/log.h"
#include "kmsg/rules.h"

namespace gpud::kmsg {

bool kernel_record(const KmsgRecordView& r) {
  constexpr int kKernFacility = 0;  // LOG_KERN >> 3
  return r.facility < 0 || r.facility == kKernFacility || r.message.ends_with(kInjectedMarker);
}

namespace {

#if defined(__x86_64__)
// The same, 32 bytes a step, on CPUs with AVX2 (the build's baseline has only SSE2).
__attribute__((target("avx2"))) size_t count_newlines_avx2(const char* p, size_t n, size_t& i) {
  size_t total = 0;
  const __m256i nl = _mm256_set1_epi8('\n');
  while (n - i >= 32) {
    __m256i acc = _mm256_setzero_si256();
    const size_t rounds = std::min<size_t>((n - i) / 32, 255);
    for (size_t r = 0; r < rounds; ++r, i += 32) {
      const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i));
      acc = _mm256_sub_epi8(acc, _mm256_cmpeq_epi8(v, nl));
    }
    const __m256i sum = _mm256_sad_epu8(acc, _mm256_setzero_si256());
    total += static_cast<size_t>(_mm256_extract_epi64(sum, 0) + _mm256_extract_epi64(sum, 1) +
                                 _mm256_extract_epi64(sum, 2) + _mm256_extract_epi64(sum, 3));
  }
  return total;
}
bool have_avx2() {
  // Asked once, after the CPU's features are read (__builtin_cpu_init: a static initializer may run
  // before libgcc's own).
  static const bool yes = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") != 0;
  }();
  return yes;
}
#endif

// '\n' bytes in [p, p + n).
size_t count_newlines(const char* p, size_t n) {
  size_t total = 0;
  size_t i = 0;
#if defined(__x86_64__)
  if (have_avx2()) total += count_newlines_avx2(p, n, i);
#endif
#if defined(__SSE2__)
  // A compare gives -1 per newline byte: up to 255 rounds add into 8-bit lanes, then one sum.
  const __m128i nl = _mm_set1_epi8('\n');
  while (n - i >= 16) {
    __m128i acc = _mm_setzero_si128();
    const size_t rounds = std::min<size_t>((n - i) / 16, 255);
    for (size_t r = 0; r < rounds; ++r, i += 16) {
      const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + i));
      acc = _mm_sub_epi8(acc, _mm_cmpeq_epi8(v, nl));
    }
    const __m128i sum = _mm_sad_epu8(acc, _mm_setzero_si128());
    total += static_cast<size_t>(_mm_cvtsi128_si32(sum)) +
             static_cast<size_t>(_mm_extract_epi16(sum, 4));
  }
#endif
  for (; i < n; ++i) total += p[i] == '\n' ? 1 : 0;
  return total;
}

const char* find_newline(const char* p, const char* end) {
  return static_cast<const char*>(memchr(p, '\n', static_cast<size_t>(end - p)));
}

// The start of the line that holds `p`, looking back no further than `begin` (a line start).
const char* line_start(const char* begin, const char* p) {
  const void* nl = memrchr(begin, '\n', static_cast<size_t>(p - begin));
  return nl != nullptr ? static_cast<const char*>(nl) + 1 : begin;
}

// dmesg -H dates a minute's first line ("[Dec 6 22:21]") and gives every other line the time since
// the line before it ("[  +0.000123]"): such a line's time is the dated line's before it plus
// every delta since, its own included. Any other line breaks the chain: the lines after it are
// undated until the next dated line.
struct ReltimeClock {
  std::optional<TimePoint> base;  // the dated line's time
  __int128 since_us = 0;          // the deltas after it (no sum of 64-bit deltas overflows)

  // Follows one more line: `v` as parsed (nullopt: a line that carries no record).
  void step(const std::optional<KmsgRecordView>& v) {
    if (!v || v->format != Format::kDmesgHuman) {
      *this = {};
    } else if (v->reltime_delta_us) {
      since_us += *v->reltime_delta_us;
    } else {
      *this = {v->time, 0};
    }
  }
  // The time of the line followed last, when the chain gives one (and TimePoint holds it).
  std::optional<TimePoint> now() const {
    if (!base) return std::nullopt;
    const __int128 ns = static_cast<__int128>(base->time_since_epoch().count()) +
                        since_us * (std::nano::den / std::micro::den);
    if (ns > INT64_MAX || ns < INT64_MIN) return std::nullopt;
    return TimePoint(Clock::duration(static_cast<int64_t>(ns)));
  }
};
static_assert(std::is_same_v<Clock::duration, std::chrono::nanoseconds>);

// Whether the line may be a dmesg -H line: only those parse as one. Cheap, for every line.
bool may_be_reltime(std::string_view line) {
  if (line.empty()) return false;
  if (line[0] == '<') return true;  // "<4>[Dec 6 22:21] ...": the parser decides
  if (line[0] != '[') return false;
  size_t j = 1;
  while (j < line.size() && line[j] == ' ') ++j;
  if (j >= line.size()) return false;
  const auto c = static_cast<unsigned char>(line[j]);
  return c == '+' || c == '-' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c >= 0x80;
}

// The clock after `line`, from the clock before it.
void step_reltime(ReltimeClock& clock, std::string_view line, const ParseOptions& parse) {
  if (!may_be_reltime(line)) {
    clock = {};
    return;
  }
  clock.step(parse_line_view(line, parse));
}

// A delta line's time from the clock after it.
void date_reltime(KmsgRecordView& v, const ReltimeClock& clock) {
  if (v.format == Format::kDmesgHuman && v.reltime_delta_us) v.time = clock.now();
}

// want_keywords' side of the reader: finds the lines that may be wanted among many, and delivers
// them (and, while want_every_line() says so, every line) in order. A line of `cut` bytes or more
// is cut there (the streaming reader's buffer holds no more of it): only that much of it is looked
// at and delivered, and it counts as truncated.
class LineSieve {
 public:
  LineSieve(const ReadOptions& opts, size_t cut, const RecordViewCallback& cb)
      : opts_(opts), cut_(cut), cb_(cb), rules_(opts.want_keywords), any_(with_encoded(opts)) {}

  // Appends to `out` the offsets from `base` of the lines in [begin, end) that may be wanted
  // whatever a multi-line rule says (they hold a keyword or an encoded message), and counts the
  // lines, and those of `cut_` bytes or more. [begin, end) holds whole lines; the last may lack its
  // '\n' (the end of the file). One pass, a block at a time: the block is counted, then sieved,
  // while in the CPU's cache.
  void scan(const char* base, const char* begin, const char* end, std::vector<size_t>& out,
            ReadStats& st) const {
    if (begin == end) return;
    // A line of cut_ bytes or more holds a whole block of the grid below: only a block without a
    // newline needs a closer look.
    const size_t block = std::max<size_t>(cut_ / 2, 1);
    const char* counted_long = nullptr;  // the start of the last long line counted
    const char* line = begin;            // the first line not sieved yet
    const char* sample = begin;          // where sampling goes on
    for (const char* q = begin; q < end;) {
      const size_t len = std::min(block, static_cast<size_t>(end - q));
      const char* q_end = q + len;
      const size_t n = count_newlines(q, len);
      st.lines += n;
      if (n == 0 && len == block) {
        const char* ls = line_start(begin, q);
        const char* nl = find_newline(q, end);
        if (static_cast<size_t>((nl != nullptr ? nl : end) - ls) >= cut_ && ls != counted_long) {
          ++st.truncated_lines;
          counted_long = ls;
        }
      }
      while (sample < q_end) {
        const std::string_view text(line, static_cast<size_t>(end - line));
        const size_t hit =
            any_.find(text, static_cast<size_t>(sample - line), static_cast<size_t>(q_end - line));
        if (hit == std::string_view::npos) {
          sample = q_end;
          break;
        }
        const char* ls = line_start(line, line + hit);
        const char* nl = find_newline(line + hit, end);
        if (wanted(piece(ls, nl != nullptr ? nl : end)))
          out.push_back(static_cast<size_t>(ls - base));
        line = nl != nullptr ? nl + 1 : end;
        sample = line;
      }
      q = q_end;
    }
    if (end[-1] != '\n') ++st.lines;  // the last line, without its newline
  }

  // Delivers, in order, the lines of [begin, end) at `offsets` from `base` (sorted), and every
  // line while want_every_line() says so. The regions of one read come in the file's order.
  void deliver(const char* base, const char* begin, const char* end,
               const std::vector<size_t>& offsets, ReadStats& st) {
    const char* pos = begin;
    clock_from_ = begin;
    auto deliver_line = [&](const char* ls) {
      const char* nl = find_newline(ls, end);
      clock_ = clock_before(ls);
      emit(piece(ls, nl != nullptr ? nl : end), st);
      clock_from_ = nl != nullptr ? nl + 1 : end;
      return clock_from_;
    };
    for (size_t off : offsets) {
      const char* c = base + off;
      while (pos < c && every_line()) pos = deliver_line(pos);
      if (c < pos) continue;  // delivered already, while every line was wanted
      pos = deliver_line(c);
    }
    while (pos < end && every_line()) pos = deliver_line(pos);
    clock_ = clock_before(end);
    clock_from_ = nullptr;
  }

  // Whether the line (as cut) may be wanted, open multi-line rules aside.
  bool wanted(std::string_view line) const {
    return rules_.may_match(line) || message_is_encoded(line);
  }
  bool every_line() const { return opts_.want_every_line && opts_.want_every_line(); }

  // Parses and delivers one line, the clock before it being clock_.
  void emit(std::string_view line, ReadStats& st) {
    auto v = parse_line_view(line, opts_.parse);
    if (may_be_reltime(line)) {
      clock_.step(v);
    } else {
      clock_ = {};
    }
    if (!v) return;
    date_reltime(*v, clock_);
    if (!kernel_record(*v)) {
      ++st.foreign_records;
      return;
    }
    ++st.records;
    cb_(*v);
  }
  // A line cut at the line cap and delivered or not (the streaming reader's): the clock follows it.
  void step_cut(std::string_view line) { step_reltime(clock_, line, opts_.parse); }

 private:
  // dmesg -H's clock after the lines before `p` (a line start or the region's end): only the lines
  // since clock_from_ (those before it were followed) are looked at, from the nearest back, up to a
  // dated line or another that breaks the chain. In any other log that is one line.
  ReltimeClock clock_before(const char* p) const {
    __int128 since_us = 0;
    for (const char* q = p; q > clock_from_;) {
      const char* le = q[-1] == '\n' ? q - 1 : q;
      const char* ls = line_start(clock_from_, le);
      const std::string_view line = piece(ls, le);
      if (!may_be_reltime(line)) return {};
      auto v = parse_line_view(line, opts_.parse);
      if (!v || v->format != Format::kDmesgHuman) return {};
      if (!v->reltime_delta_us) return {v->time, since_us};
      since_us += *v->reltime_delta_us;
      q = ls;
    }
    ReltimeClock c = clock_;
    c.since_us += since_us;
    return c;
  }

  static std::vector<Literal> with_encoded(const ReadOptions& opts) {
    std::vector<Literal> all = opts.want_keywords;
    all.push_back({kEncodedMessageKey});
    return all;
  }
  std::string_view piece(const char* ls, const char* le) const {
    return std::string_view(ls, std::min(static_cast<size_t>(le - ls), cut_));
  }

  const ReadOptions& opts_;
  const size_t cut_;
  const RecordViewCallback& cb_;
  const Prefilter rules_;             // the rules' keywords
  const Prefilter any_;               // and the encoded message's
  ReltimeClock clock_;                // after the lines before clock_from_
  const char* clock_from_ = nullptr;  // in the region being delivered
};

// The longest line the streaming reader delivers whole: longer ones fill its buffer and are cut.
size_t line_cut(const ReadOptions& opts) {
  return std::max(std::max<size_t>(opts.buffer_bytes, 4096), opts.max_line_bytes);
}

// Splits `fill` bytes into lines. Returns a read error only.
template <typename ReadFn>
Result<ReadStats> read_lines(ReadFn&& read_some, const RecordViewCallback& cb,
                             const ReadOptions& opts) {
  ReadStats st;
  const size_t cap = std::max<size_t>(opts.buffer_bytes, 4096);
  std::vector<char> buf(cap);
  size_t have = 0;        // bytes in buf
  bool skipping = false;  // inside an over-long line, dropping until '\n'
  const bool sieved = !opts.want_keywords.empty();
  std::optional<LineSieve> sieve;
  if (sieved) sieve.emplace(opts, line_cut(opts), cb);
  std::vector<size_t> offsets;
  ReltimeClock clock;  // dmesg -H's, after the lines so far (line by line)
  auto emit = [&](std::string_view line) {
    ++st.lines;
    if (sieved) {  // a line cut at the cap
      if (sieve->every_line() || sieve->wanted(line)) {
        sieve->emit(line, st);
      } else {
        sieve->step_cut(line);
      }
      return;
    }
    step_reltime(clock, line, opts.parse);
    if (opts.want_line && !opts.want_line(line) && !message_is_encoded(line)) return;
    auto v = parse_line_view(line, opts.parse);
    if (!v) return;
    date_reltime(*v, clock);
    if (!kernel_record(*v)) {
      ++st.foreign_records;
      return;
    }
    ++st.records;
    cb(*v);
  };
  // Whole lines, [begin, end): through the sieve at once, or one by one.
  auto emit_lines = [&](const char* begin, const char* end) {
    if (sieved) {
      offsets.clear();
      sieve->scan(begin, begin, end, offsets, st);
      sieve->deliver(begin, begin, end, offsets, st);
      return;
    }
    for (const char* p = begin; p < end;) {
      const char* nl = find_newline(p, end);
      emit(std::string_view(p, static_cast<size_t>((nl != nullptr ? nl : end) - p)));
      p = nl != nullptr ? nl + 1 : end;
    }
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
    if (skipping) {  // the rest of a line already cut: dropped up to its newline
      const char* nl = find_newline(buf.data() + have, end);
      if (nl == nullptr) {
        have = 0;  // still inside the over-long line
        continue;
      }
      skipping = false;
      p = nl + 1;
    }
    // The old bytes [0, have) hold no newline: only the new ones can end the complete lines.
    const char* search = std::max<const char*>(p, buf.data() + have);
    const void* last = memrchr(search, '\n', static_cast<size_t>(end - search));
    if (last != nullptr) {
      const char* done = static_cast<const char*>(last) + 1;
      emit_lines(p, done);
      p = done;
    }
    have = static_cast<size_t>(end - p);
    if (p != buf.data() && have > 0) std::memmove(buf.data(), p, have);
  }
  if (have > 0 && !skipping) emit_lines(buf.data(), buf.data() + have);
  return st;
}

// A regular file, mapped: its wanted lines are found a round at a time (its halves on two threads),
// then delivered in order on this thread.
ReadStats read_mapped(const char* data, size_t size, const RecordViewCallback& cb,
                      const ReadOptions& opts) {
  const size_t round = std::max<size_t>(opts.map_round_bytes, 1);
  // Two halves only where each is worth a thread's start.
  const size_t min_half = std::min<size_t>(size_t{512} << 10, std::max<size_t>(round / 4, 1));
  ReadStats st;
  st.bytes = size;
  LineSieve sieve(opts, line_cut(opts), cb);
  const bool two = opts.threads >= 2;
  const char* end = data + size;
  // The start of the line after the one that holds `p` (or `end`).
  auto next_line = [&](const char* p) {
    if (p >= end) return end;
    const char* nl = find_newline(p, end);
    return nl != nullptr ? nl + 1 : end;
  };
  std::vector<size_t> first, second;
  for (const char* pos = data; pos < end;) {
    const size_t left = static_cast<size_t>(end - pos);
    const char* round_end = left <= round ? end : next_line(pos + round - 1);
    const size_t len = static_cast<size_t>(round_end - pos);
    const char* mid = two && len >= 2 * min_half ? next_line(pos + len / 2 - 1) : round_end;
    first.clear();
    second.clear();
    ReadStats second_st;
    std::thread worker;
    if (mid < round_end) {
      worker = std::thread(
          [&, pos, mid, round_end] { sieve.scan(pos, mid, round_end, second, second_st); });
    }
    sieve.scan(pos, pos, mid, first, st);
    if (worker.joinable()) worker.join();
    st.lines += second_st.lines;
    st.truncated_lines += second_st.truncated_lines;
    first.insert(first.end(), second.begin(), second.end());
    sieve.deliver(pos, pos, round_end, first, st);
    pos = round_end;
  }
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
  // A regular file with a size (not /proc's) is mapped: no copy of it, and two threads can look
  // for the wanted lines of its halves. A file cut short while it is read raises SIGBUS on the
  // lost part: the caller decides what that does (`gpud scan` ends with a message, exit 2).
  struct stat sb {};
  if (!opts.want_keywords.empty() && ::fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) &&
      sb.st_size > 0 && static_cast<uint64_t>(sb.st_size) <= SIZE_MAX) {
    const size_t size = static_cast<size_t>(sb.st_size);
    void* m = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (m != MAP_FAILED) {
      ::close(fd);
      (void)::madvise(m, size, MADV_SEQUENTIAL);
      ReadStats st = read_mapped(static_cast<const char*>(m), size, cb, opts);
      ::munmap(m, size);
      return st;
    }
  }
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
