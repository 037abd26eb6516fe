// gpud_fake_systemd_bus SOCKET MODE [UNIT=ACTIVE/SUB ...]: the tests' fake systemd (FakeSystemdBus)
// as a process of its own, for the container-image tests whose gpud runs in a container and asks a
// host root's systemd over <root>/run/systemd/private (MODE "systemd") or the system bus socket
// (MODE "bus"). Each UNIT=ACTIVE/SUB is a loaded unit in that state ("kubelet.service=failed/failed");
// any other unit is "not-found". Serves until SIGTERM or SIGINT; exits 1 when the socket cannot be
// served, 2 on a malformed argument.
#include <signal.h>

#include <cstdio>
#include <map>
#include <string>

#include "testing/fake_systemd_bus.h"

using gpud::testing_support::FakeSystemdBus;
using gpud::testing_support::FakeUnit;

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s SOCKET systemd|bus [UNIT=ACTIVE/SUB ...]\n", argv[0]);
    return 2;
  }
  const std::string mode = argv[2];
  if (mode != "systemd" && mode != "bus") {
    std::fprintf(stderr, "%s: mode '%s' is neither 'systemd' nor 'bus'\n", argv[0], argv[2]);
    return 2;
  }
  std::map<std::string, FakeUnit> units;
  for (int i = 3; i < argc; ++i) {
    const std::string arg = argv[i];
    const size_t eq = arg.find('=');
    const size_t slash = arg.find('/', eq == std::string::npos ? 0 : eq);
    if (eq == std::string::npos || eq == 0 || slash == std::string::npos ||
        slash == eq + 1 || slash + 1 == arg.size()) {
      std::fprintf(stderr, "%s: '%s' is not UNIT=ACTIVE/SUB\n", argv[0], argv[i]);
      return 2;
    }
    FakeUnit u;
    u.active_state = arg.substr(eq + 1, slash - eq - 1);
    u.sub_state = arg.substr(slash + 1);
    units[arg.substr(0, eq)] = u;
  }
  // Signals are taken by sigwait below, never by a handler on the serving thread.
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);
  FakeSystemdBus bus(argv[1], std::move(units),
                     mode == "bus" ? FakeSystemdBus::Mode::kMessageBus
                                   : FakeSystemdBus::Mode::kSystemd);
  if (!bus.ok()) {
    std::fprintf(stderr, "%s: cannot serve %s\n", argv[0], argv[1]);
    return 1;
  }
  std::printf("serving %s\n", argv[1]);
  std::fflush(stdout);
  int sig = 0;
  sigwait(&stop, &sig);
  return 0;
}
