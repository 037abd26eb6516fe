#include "host/log_tail.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace gpud::host {

LogTail::LogTail(std::string path, size_t backlog_bytes, size_t max_read, size_t max_line)
    : path_(std::move(path)),
      backlog_bytes_(backlog_bytes),
      max_read_(std::max<size_t>(max_read, 1)),
      max_line_(std::max<size_t>(max_line, 1)) {}

Result<LogTail::Lines> LogTail::read() {
  Lines out;
  // O_NONBLOCK: a FIFO put where the log should be must not block the check; it is refused below.
  int fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) {
    if (errno == ENOENT) {
      // Not written yet (or rotated away and not recreated): whatever appears next is new.
      out.missing = true;
      first_ = false;
      ino_ = 0;
      offset_ = 0;
      partial_.clear();
      return out;
    }
    return make_error("open " + path_ + ": " + std::strerror(errno));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    return make_error("stat " + path_ + ": " + std::strerror(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return make_error(path_ + " is not a regular file");
  }
  if (first_) {
    // The backlog: the file's last backlog_bytes_, from the first line that starts inside them.
    first_ = false;
    out.backlog = true;
    offset_ = st.st_size > static_cast<off_t>(backlog_bytes_)
                  ? st.st_size - static_cast<off_t>(backlog_bytes_)
                  : 0;
    if (offset_ > 0) {
      // Skip to the first whole line: the byte before offset_ must be a newline.
      char c = 0;
      if (::pread(fd, &c, 1, offset_ - 1) == 1 && c != '\n') partial_ = std::string(1, '\0');
    }
  } else if (st.st_dev != dev_ || st.st_ino != ino_) {
    // Rotated: a new file, read from its start. What the old one got after the last read is gone
    // with it (logrotate's rename leaves it under another name).
    offset_ = 0;
    partial_.clear();
  } else if (st.st_size < offset_) {
    // Truncated in place (copytruncate): what is there now was written after the truncation.
    offset_ = 0;
    partial_.clear();
  }
  dev_ = st.st_dev;
  ino_ = st.st_ino;

  size_t want = static_cast<size_t>(std::max<off_t>(st.st_size - offset_, 0));
  want = std::min(want, max_read_);
  std::string buf(want, '\0');
  size_t got = 0;
  while (got < want) {
    ssize_t n = ::pread(fd, buf.data() + got, want - got, offset_ + static_cast<off_t>(got));
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      ::close(fd);
      return make_error("read " + path_ + ": " + std::strerror(err));
    }
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  ::close(fd);
  buf.resize(got);
  offset_ += static_cast<off_t>(got);

  size_t start = 0;
  while (start < buf.size()) {
    size_t nl = buf.find('\n', start);
    size_t end = nl == std::string::npos ? buf.size() : nl;
    // At most max_line_ + 1 bytes of a line are kept: one more than is emitted, to know it was cut.
    size_t room = max_line_ + 1 - std::min(partial_.size(), max_line_ + 1);
    partial_.append(buf, start, std::min(end - start, room));
    if (nl == std::string::npos) break;
    start = nl + 1;
    // A leading NUL marks the cut line the backlog started inside: dropped, not half-parsed.
    if (!partial_.empty() && partial_[0] == '\0') {
      partial_.clear();
      continue;
    }
    if (!partial_.empty() && partial_.back() == '\r') partial_.pop_back();
    if (partial_.size() > max_line_) partial_.resize(max_line_);
    out.lines.push_back(std::move(partial_));
    partial_.clear();
  }
  // A line that never ends is emitted once it reaches max_line_, so it cannot grow without bound.
  if (partial_.size() > max_line_ && partial_[0] != '\0') {
    partial_.resize(max_line_);
    out.lines.push_back(std::move(partial_));
    partial_.clear();
  }
  return out;
}

}  // namespace gpud::host
