#include "app/truncation_guard.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <string>

#include "testing/temp_dir.h"

namespace gpud::app {
namespace {

// A mapped log cut short and then read where it was: SIGBUS, which the guard turns into exit 2
// with a message naming the log (what `gpud scan` does when logrotate truncates the log it reads).
void read_a_log_cut_short_while_mapped(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0 || ::ftruncate(fd, 1 << 16) != 0) ::_exit(10);
  auto* p =
      static_cast<volatile const char*>(::mmap(nullptr, 1 << 16, PROT_READ, MAP_PRIVATE, fd, 0));
  if (p == MAP_FAILED || ::ftruncate(fd, 0) != 0) ::_exit(11);
  TruncationGuard guard(path);
  (void)p[1 << 15];  // past the new end of the file
  ::_exit(12);       // not reached: the read raised SIGBUS
}

TEST(TruncationGuardDeathTest, ALogCutShortWhileReadEndsWithExitTwoAndAMessage) {
  testing_support::TempDir dir("gpud-truncated-log");
  ASSERT_FALSE(dir.path().empty());
  const std::string log = dir.path() + "/kern.log";
  EXPECT_EXIT(read_a_log_cut_short_while_mapped(log), ::testing::ExitedWithCode(2),
              "--kernel-log .*kern.log: the file was cut short while it was read");
}

TEST(TruncationGuard, PutsThePreviousDispositionBack) {
  struct sigaction before {
  }, after{};
  ASSERT_EQ(::sigaction(SIGBUS, nullptr, &before), 0);
  { TruncationGuard guard("/var/log/kern.log"); }
  ASSERT_EQ(::sigaction(SIGBUS, nullptr, &after), 0);
  EXPECT_EQ(before.sa_handler, after.sa_handler);
}

}  // namespace
}  // namespace gpud::app
