#include "host/command.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "host/host_fs.h"
#include "host/proc_pid_stat.h"

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

// Alive: exists and is not a zombie (a killed process reparented to a PID 1 that does not reap
// stays a zombie, which runs nothing).
bool alive(pid_t pid) {
  auto stat = read_proc_pid_stat(HostFs("/"), pid);
  return stat && stat->state != 'Z';
}

// Waits up to 2 s for every pid to die (SIGKILL is sent at once, but a dying process takes a
// moment to become a zombie); the ones still alive.
std::vector<pid_t> survivors(const std::vector<pid_t>& pids) {
  std::vector<pid_t> left;
  for (int i = 0; i < 100; ++i) {
    left.clear();
    for (pid_t p : pids)
      if (alive(p)) left.push_back(p);
    if (left.empty()) break;
    std::this_thread::sleep_for(milliseconds(20));
  }
  return left;
}

std::vector<pid_t> read_pids(const std::string& path) {
  std::vector<pid_t> out;
  std::ifstream in(path);
  pid_t p = 0;
  while (in >> p) out.push_back(p);
  return out;
}

struct PidFile {
  std::string path;
  PidFile() {
    char tmpl[] = "/tmp/gpud-command-pids-XXXXXX";
    const int fd = ::mkstemp(tmpl);
    ::close(fd);
    path = tmpl;
  }
  ~PidFile() { ::unlink(path.c_str()); }
};

TEST(RunProcess, DeadlineKillsTheWholeGroup) {
  PidFile pids;
  ProcessSpec spec;
  // A child, a grandchild in a subshell that ignores SIGTERM, and the shell itself.
  spec.argv = {"sh", "-c",
               "echo $$ >> " + pids.path + "; sleep 300 & echo $! >> " + pids.path +
                   "; ( trap '' TERM; sleep 300 & echo $! >> " + pids.path +
                   "; wait ) & echo started; wait"};
  spec.timeout = milliseconds(800);
  const auto start = std::chrono::steady_clock::now();
  auto r = run_process(spec);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  EXPECT_TRUE(r->timed_out);
  EXPECT_FALSE(r->cancelled);
  EXPECT_EQ(r->term_signal, SIGKILL);
  EXPECT_EQ(r->exit_code, -1);
  EXPECT_EQ(r->out, "started\n") << "the output read before the deadline is kept";
  EXPECT_GE(r->duration, milliseconds(800));
  auto all = read_pids(pids.path);
  ASSERT_EQ(all.size(), 3U) << "sh, sleep, the subshell's sleep";
  EXPECT_TRUE(survivors(all).empty()) << "a process of the group survived the deadline";
}

TEST(RunProcess, WhatTheProgramLeftRunningInItsGroupIsKilledWhenItExits) {
  PidFile pids;
  ProcessSpec spec;
  spec.argv = {"sh", "-c", "sleep 300 > /dev/null 2>&1 & echo $! > " + pids.path + "; echo done"};
  spec.timeout = milliseconds(20'000);
  const auto start = std::chrono::steady_clock::now();
  auto r = run_process(spec);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  EXPECT_FALSE(r->timed_out);
  EXPECT_EQ(r->exit_code, 0);
  EXPECT_EQ(r->out, "done\n");
  auto all = read_pids(pids.path);
  ASSERT_EQ(all.size(), 1U);
  EXPECT_TRUE(survivors(all).empty()) << "the background sleep outlived the run";
}

TEST(RunProcess, CancelKillsTheGroupFromAnotherThread) {
  PidFile pids;
  std::atomic<bool> cancel{false};
  ProcessSpec spec;
  spec.argv = {"sh", "-c", "sleep 300 & echo $! > " + pids.path + "; wait"};
  spec.timeout = milliseconds(60'000);
  spec.cancel = &cancel;
  std::thread stopper([&] {
    std::this_thread::sleep_for(milliseconds(300));
    cancel = true;
  });
  const auto start = std::chrono::steady_clock::now();
  auto r = run_process(spec);
  stopper.join();
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  EXPECT_TRUE(r->cancelled);
  EXPECT_FALSE(r->timed_out);
  EXPECT_EQ(r->term_signal, SIGKILL);
  auto all = read_pids(pids.path);
  ASSERT_EQ(all.size(), 1U);
  EXPECT_TRUE(survivors(all).empty()) << "the sleep outlived the cancellation";
}

TEST(RunCommand, CancelledRunIsAnErrorOfItsOwn) {
  std::atomic<bool> cancel{true};
  auto r = run_command({"sleep", "30"}, kDefaultSearchPath, milliseconds(30'000), 1024, &cancel);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, kCommandCancelled);
  EXPECT_EQ(r.error().message, "`sleep 30` was cancelled");
}

TEST(RunProcess, MergedOutputIsCappedAndTheRestCountedAsDiscarded) {
  ProcessSpec spec;
  spec.argv = {"sh", "-c", "head -c 300000 /dev/zero | tr '\\0' x; echo end >&2"};
  spec.timeout = milliseconds(10'000);
  spec.max_output = 4096;
  spec.merge_stderr = true;
  auto r = run_process(spec);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->exit_code, 0);
  EXPECT_EQ(r->out, std::string(4096, 'x'));
  EXPECT_TRUE(r->err.empty());
  EXPECT_EQ(r->discarded_bytes, 300000U + 4 - 4096) << "stderr went to the same, full, output";
}

TEST(RunProcess, GivenEnvironmentAndFd3AndNothingElseOfTheCaller) {
  // Not close-on-exec, and numbered apart from the child's 0-4: it must not reach the child.
  const int opened = ::open("/dev/null", O_RDONLY);
  ASSERT_GE(opened, 0);
  const int leaked = ::fcntl(opened, F_DUPFD, 20);
  ::close(opened);
  ASSERT_GE(leaked, 20);
  const int script = ::memfd_create("gpud-command-test", MFD_CLOEXEC);
  ASSERT_GE(script, 0);
  const std::string text = "echo \"from fd 3: $GREETING\"; env; ls /proc/self/fd\n";
  ASSERT_EQ(::write(script, text.data(), text.size()), static_cast<ssize_t>(text.size()));
  ASSERT_EQ(::lseek(script, 0, SEEK_SET), 0);
  ::setenv("GPUD_COMMAND_TEST_SECRET", "x", 1);
  ProcessSpec spec;
  spec.argv = {"sh", "/proc/self/fd/3"};
  spec.environment = std::vector<std::string>{"GREETING=hello", "PATH=/usr/bin:/bin"};
  spec.fd3 = script;
  spec.timeout = milliseconds(10'000);
  auto r = run_process(spec);
  ::unsetenv("GPUD_COMMAND_TEST_SECRET");
  ::close(script);
  ::close(leaked);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->exit_code, 0) << r->err;
  EXPECT_TRUE(r->out.starts_with("from fd 3: hello\n")) << r->out;
  EXPECT_EQ(r->out.find("GPUD_COMMAND_TEST_SECRET"), std::string::npos);
  // ls's own descriptors: 0-2, the script (3) and the directory it lists; none of the caller's.
  EXPECT_EQ(r->out.find("\n" + std::to_string(leaked) + "\n"), std::string::npos)
      << "descriptor " << leaked << " leaked: " << r->out;
}

}  // namespace
}  // namespace gpud::host
