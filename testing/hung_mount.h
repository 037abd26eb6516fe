// Test helper: a FUSE mount whose statfs does not answer (testing/hung_fuse), mounted for one test
// in a directory of its own and taken away however the test ends (the FUSE daemon killed, which
// fails the blocked calls, then a lazy unmount).
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "testing/emulator.h"

namespace gpud::testing {

class HungMount {
 public:
  explicit HungMount(int hang_seconds = 30) {
#ifndef GPUD_HUNG_FUSE
    why_not_ = "the hung_fuse helper was not built (libfuse3-dev missing)";
#else
    const int fd = ::open("/dev/fuse", O_RDWR | O_CLOEXEC);
    if (fd < 0) {
      why_not_ = "/dev/fuse cannot be opened here";
      return;
    }
    ::close(fd);
    char dir[] = "/tmp/gpud-hung-mount-XXXXXX";
    if (::mkdtemp(dir) == nullptr) {
      why_not_ = "no temporary directory";
      return;
    }
    path_ = dir;
    const std::string seconds = std::to_string(hang_seconds);
    pid_ = ::fork();
    if (pid_ == 0) {
      std::vector<std::string> args =
          testing_support::emulated_command({GPUD_HUNG_FUSE, path_, seconds});
      std::vector<char*> argv;
      for (std::string& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
    for (int i = 0; i < 500 && !mounted(); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    if (!mounted()) why_not_ = "hung_fuse did not mount " + path_ + " within 5 s";
#endif
  }
  ~HungMount() {
    release();
    if (!path_.empty()) {
      ::umount2(path_.c_str(), MNT_DETACH);
      std::error_code ec;
      std::filesystem::remove(path_, ec);
    }
  }
  HungMount(const HungMount&) = delete;
  HungMount& operator=(const HungMount&) = delete;

  // Kills the FUSE daemon: every call blocked on the mount fails (ENOTCONN) and returns. A thread
  // in such a call cannot be killed before that (the kernel waits for the answer), so neither can
  // its process exit.
  void release() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }

  // Empty when mounted; else why not (the test skips with it).
  const std::string& why_not() const { return why_not_; }
  const std::string& path() const { return path_; }

 private:
  bool mounted() const {
    std::ifstream in("/proc/self/mountinfo");
    std::string line;
    while (std::getline(in, line))
      if (line.find(" " + path_ + " ") != std::string::npos) return true;
    return false;
  }

  std::string path_;
  std::string why_not_;
  pid_t pid_ = -1;
};

}  // namespace gpud::testing
