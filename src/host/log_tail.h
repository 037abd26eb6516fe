// LogTail: the lines appended to a text log file since the last read, as `tail -F` sees them, read
// at check time instead of by a process that follows the file: a rotated file (a new inode) is read
// from its start, a truncated one from its new end, a line still being written waits for its
// newline, and each read is bounded.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <string>
#include <vector>

#include "core/result.h"

namespace gpud::host {

class LogTail {
 public:
  // backlog_bytes: how much of the file's end the first read takes (whole lines only), so a daemon
  // that starts sees what was logged just before it. max_read: the most one read() takes; the rest
  // waits for the next call. A line longer than max_line is cut there.
  explicit LogTail(std::string path, size_t backlog_bytes = 256 << 10, size_t max_read = 4 << 20,
                   size_t max_line = 16 << 10);

  struct Lines {
    std::vector<std::string> lines;  // complete lines, without their newline, oldest first
    bool backlog = false;            // the lines were there before the first read
    bool missing = false;            // the file does not exist (not an error: not written yet)
  };
  // The complete lines written since the last call. An error when the file exists but cannot be
  // read, or is not a regular file.
  Result<Lines> read();
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  size_t backlog_bytes_, max_read_, max_line_;
  bool first_ = true;
  dev_t dev_ = 0;
  ino_t ino_ = 0;
  off_t offset_ = 0;
  std::string partial_;  // the start of a line without its newline yet
};

}  // namespace gpud::host
