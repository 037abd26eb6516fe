// Test helper: the command line that starts one of this build's own programs (gpud, hung_fuse) from
// a test. In an arm64 build tested on an amd64 machine (cmake/toolchain-aarch64-linux-gnu.cmake)
// the tests themselves run under qemu-user, which emulates one process: a program it execs is the
// host kernel's to run, and a kernel without qemu registered in binfmt_misc refuses an arm64 one.
// There CMake defines GPUD_TEST_EMULATOR (CMAKE_CROSSCOMPILING_EMULATOR) and the child is started
// through it; elsewhere the command line is the program's own.
#pragma once

#include <string>
#include <vector>

namespace gpud::testing_support {

inline std::vector<std::string> emulated_command(std::vector<std::string> argv) {
#ifdef GPUD_TEST_EMULATOR
  argv.insert(argv.begin(), GPUD_TEST_EMULATOR);
#endif
  return argv;
}

// Whether this build's programs run under an emulator (timing bounds measured natively do not
// hold there).
inline constexpr bool kTestsEmulated =
#ifdef GPUD_TEST_EMULATOR
    true;
#else
    false;
#endif

}  // namespace gpud::testing_support
