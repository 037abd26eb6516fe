// TruncationGuard: `gpud scan`'s answer to a saved log cut short while it is read.
// kmsg::read_saved_log_file maps a regular log; when the file shrinks meanwhile (logrotate's
// copytruncate), the next read of the lost part raises SIGBUS, which nothing can resume from. While
// a guard lives, SIGBUS ends the process with a message naming the log and exit code 2
// (kExitUsage), never a crash; the previous disposition is put back when it goes.
#pragma once

#include <signal.h>

#include <string>

namespace gpud::app {

class TruncationGuard {
 public:
  explicit TruncationGuard(const std::string& path);
  ~TruncationGuard();
  TruncationGuard(const TruncationGuard&) = delete;
  TruncationGuard& operator=(const TruncationGuard&) = delete;

 private:
  struct sigaction previous_ {};
  bool installed_ = false;
};

}  // namespace gpud::app
