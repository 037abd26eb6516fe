#include "app/truncation_guard.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "app/verbs.h"

namespace gpud::app {

namespace {

// Written before the handler can run: the handler only calls write(2) and _exit(2), which are
// async-signal-safe.
char g_message[512];
size_t g_length = 0;

void on_sigbus(int) {
  (void)!::write(2, g_message, g_length);
  ::_exit(kExitUsage);
}

}  // namespace

TruncationGuard::TruncationGuard(const std::string& path) {
  const std::string text = "\n✘ --kernel-log " + path.substr(0, 300) +
                           ": the file was cut short while it was read (rotated with "
                           "copytruncate?); scan it again, or scan a copy\n";
  g_length = std::min(text.size(), sizeof g_message);
  std::memcpy(g_message, text.data(), g_length);
  struct sigaction sa {};
  sa.sa_handler = on_sigbus;
  sigemptyset(&sa.sa_mask);
  installed_ = ::sigaction(SIGBUS, &sa, &previous_) == 0;
}

TruncationGuard::~TruncationGuard() {
  if (installed_) ::sigaction(SIGBUS, &previous_, nullptr);
}

}  // namespace gpud::app
