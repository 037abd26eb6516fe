#include "host/command.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace gpud::host {
namespace {

using std::chrono::milliseconds;

TEST(FindExecutable, SearchesEachDirectoryOfThePath) {
  auto sh = find_executable("sh", "/nonexistent:/bin:/usr/bin");
  ASSERT_TRUE(sh.has_value());
  EXPECT_TRUE(sh->ends_with("/sh"));
  EXPECT_FALSE(find_executable("gpud-no-such-program", kDefaultSearchPath).has_value());
  EXPECT_FALSE(find_executable("sh", "").has_value());
  EXPECT_EQ(find_executable("/bin/sh", ""), std::optional<std::string>("/bin/sh"));
  EXPECT_FALSE(find_executable(std::string(GPUD_SOURCE_DIR) + "/README.md", "").has_value())
      << "not executable";
}

// gpud in a container: the host's programs are under --host-root, in the system directories or the
// GPU Operator's driver root, and a host's absolute symbolic link resolves only on the host.
TEST(FindHostExecutable, OnOwnPathOrUnderTheHostRootOrADriverRootWithin) {
  namespace fs = std::filesystem;
  char tmpl[] = "/tmp/gpud-host-exec-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string root = tmpl;
  auto program = [](const std::string& path, bool executable) {
    fs::create_directories(fs::path(path).parent_path());
    std::ofstream(path) << "#!/bin/sh\n";
    fs::permissions(path, executable ? fs::perms::owner_all : fs::perms::owner_read);
  };
  const std::vector<std::string> driver = {"/run/nvidia/driver"};
  EXPECT_FALSE(find_host_executable(root, "nv-fabricmanager", "", driver).has_value());
  program(root + "/run/nvidia/driver/usr/bin/nv-fabricmanager", true);
  EXPECT_FALSE(find_host_executable(root, "nv-fabricmanager", "").has_value())
      << "the driver root is looked in only where asked";
  EXPECT_EQ(find_host_executable(root + "/", "nv-fabricmanager", "", driver),
            root + "/run/nvidia/driver/usr/bin/nv-fabricmanager");
  program(root + "/usr/sbin/kubelet", false);
  EXPECT_FALSE(find_host_executable(root, "kubelet", "").has_value()) << "not executable";
  fs::create_directories(root + "/usr/local/bin");
  fs::create_symlink("/opt/host-only/tailscaled", root + "/usr/local/bin/tailscaled");
  EXPECT_EQ(find_host_executable(root, "tailscaled", ""), root + "/usr/local/bin/tailscaled");
  // gpud's own search path first; the root "/" is not looked under again; no paths in names.
  EXPECT_TRUE(find_host_executable(root, "sh", "/bin")->ends_with("/bin/sh"));
  EXPECT_FALSE(find_host_executable("/", "gpud-no-such-program", "").has_value());
  EXPECT_FALSE(find_host_executable(root, "../usr/sbin/kubelet", "").has_value());
  fs::remove_all(root);
}

TEST(RunCommand, CapturesStdoutStderrAndExitStatus) {
  auto r = run_command({"sh", "-c", "echo out; echo err >&2; exit 3"}, kDefaultSearchPath,
                       milliseconds(5000));
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->exit_code, 3);
  EXPECT_EQ(r->out, "out\n");
  EXPECT_EQ(r->err, "err\n");
}

TEST(RunCommand, KillsTheProgramAndWhatItStartedAtTheDeadline) {
  const auto start = std::chrono::steady_clock::now();
  auto r = run_command({"sh", "-c", "sleep 30 & sleep 30"}, kDefaultSearchPath, milliseconds(200));
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("timed out after 200 ms"), std::string::npos)
      << r.error().message;
  EXPECT_EQ(r.error().code, kCommandTimedOut);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

TEST(RunCommand, MissingProgramIsAnError) {
  auto r = run_command({"gpud-no-such-program"}, kDefaultSearchPath, milliseconds(1000));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message, "gpud-no-such-program not found");
}

TEST(RunCommand, OutputBeyondTheLimitIsDroppedWithoutBlockingTheProgram) {
  auto r = run_command({"sh", "-c", "head -c 200000 /dev/zero; echo done >&2"}, kDefaultSearchPath,
                       milliseconds(5000), 1000);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->out.size(), 1000u);
  EXPECT_EQ(r->err, "done\n");
  EXPECT_EQ(r->exit_code, 0);
}

}  // namespace
}  // namespace gpud::host
