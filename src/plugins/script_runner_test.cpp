#include "plugins/script_runner.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

namespace gpud::plugins {
namespace {

struct TempDir {
  std::string path;
  TempDir() {
    char tmpl[] = "/tmp/gpud-script-XXXXXX";
    path = ::mkdtemp(tmpl);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
};

// Alive: exists and is not a zombie (a killed process reparented to a PID 1 that does not reap
// stays a zombie, which runs nothing).
bool alive(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (stat.empty()) return false;
  auto close = stat.rfind(')');
  return close != std::string::npos && close + 2 < stat.size() && stat[close + 2] != 'Z';
}

std::vector<pid_t> read_pids(const std::string& path) {
  std::vector<pid_t> out;
  std::ifstream in(path);
  pid_t p = 0;
  while (in >> p) out.push_back(p);
  return out;
}

ScriptOptions quick(std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
  ScriptOptions o;
  o.timeout = timeout;
  o.plugin_name = "test";
  return o;
}

TEST(PluginScript, ExitCodeAndOutputOfBothStreams) {
  auto r = run_bash_script("echo out; echo err >&2; exit 3", quick());
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_EQ(r.output, "out\nerr\n");
  EXPECT_FALSE(r.ok());
  EXPECT_TRUE(r.error.empty()) << r.error;
  EXPECT_FALSE(r.timed_out);
  auto ok = run_bash_script("set -euo pipefail\nx=$(echo 5)\n[ \"$x\" = 5 ]\n", quick());
  EXPECT_TRUE(ok.ok()) << ok.output;
}

TEST(PluginScript, TimeoutKillsTheWholeProcessTree) {
  TempDir dir;
  const std::string pids = dir.path + "/pids";
  // Children, a grandchild in a subshell, and one that ignores SIGTERM: all in bash's group.
  const std::string script = "echo $$ >> " + pids + "\n" + "sleep 300 & echo $! >> " + pids + "\n" +
                             "( trap '' TERM; sleep 300 & echo $! >> " + pids +
                             "; wait ) &\n"
                             "echo $! >> " +
                             pids + "\n" +
                             "echo started\n"
                             "wait\n";
  const auto start = std::chrono::steady_clock::now();
  auto r = run_bash_script(script, quick(std::chrono::milliseconds(1500)));
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_TRUE(r.timed_out);
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.exit_code, 128 + SIGKILL);
  EXPECT_EQ(r.output, "started\n");
  EXPECT_LT(took, std::chrono::seconds(5));
  auto all = read_pids(pids);
  ASSERT_EQ(all.size(), 4u) << "bash, sleep, subshell, its sleep";
  // SIGKILL is delivered at once, but a dying process takes a moment to become a zombie.
  for (int i = 0; i < 100; ++i) {
    bool any = false;
    for (pid_t p : all) any = any || alive(p);
    if (!any) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  for (pid_t p : all) EXPECT_FALSE(alive(p)) << "process " << p << " survived the timeout";
}

TEST(PluginScript, BackgroundJobsDoNotOutliveTheRun) {
  TempDir dir;
  const std::string pids = dir.path + "/pids";
  const auto start = std::chrono::steady_clock::now();
  auto r = run_bash_script("sleep 300 & echo $! > " + pids + "\necho done\n", quick());
  EXPECT_TRUE(r.ok()) << r.output << r.error;
  EXPECT_EQ(r.output, "done\n");
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  auto all = read_pids(pids);
  ASSERT_EQ(all.size(), 1u);
  for (int i = 0; i < 100 && alive(all[0]); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_FALSE(alive(all[0]));
}

TEST(PluginScript, TenMegabytesOfOutputAreReadAndAllButTheFirst4KiBDiscarded) {
  const auto start = std::chrono::steady_clock::now();
  auto r =
      run_bash_script("head -c 10485760 /dev/zero | tr '\\0' x\necho; echo end >&2\n", quick());
  EXPECT_TRUE(r.ok()) << r.error;
  EXPECT_FALSE(r.timed_out);
  EXPECT_EQ(r.output.size(), kMaxOutputBytes);
  EXPECT_EQ(r.output, std::string(kMaxOutputBytes, 'x'));
  EXPECT_EQ(r.discarded_bytes, 10485760u + 1 + 4 - kMaxOutputBytes);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(15));
}

TEST(PluginScript, MinimalEnvironmentAndNoInheritedDescriptors) {
  ::setenv("GPUD_ADMIN_TOKEN", "secret-token-value-1234", 1);
  auto o = quick();
  o.path = "/usr/bin:/bin";
  o.host_root = "/host";
  auto r = run_bash_script(
      "env | sort | grep -v -E '^(PWD|SHLVL|_)='\necho fds: $(ls /proc/self/fd | wc -l)\n", o);
  ::unsetenv("GPUD_ADMIN_TOKEN");
  EXPECT_TRUE(r.ok()) << r.output;
  EXPECT_NE(r.output.find("PATH=/usr/bin:/bin\n"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("GPUD_PLUGIN_NAME=test\n"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("NAME=test\n"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("GPUD_PLUGIN_PARAM=\n"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("HOME=/\n"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("GPUD_HOST_ROOT=/host\n"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("secret-token"), std::string::npos) << r.output;
  // ls's own: 0-2, the script (3) and the directory ls reads; nothing of this process's.
  const size_t at = r.output.find("fds: ");
  ASSERT_NE(at, std::string::npos) << r.output;
  EXPECT_LE(std::stoi(r.output.substr(at + 5)), 5) << r.output;
}

TEST(PluginScript, ScriptTextIsNeverAShellArgument) {
  // Quotes, $() and ; in the script stay the script's: bash reads it as a file.
  auto r = run_bash_script("echo \"$0\"; echo '$(id); \"'", quick());
  EXPECT_TRUE(r.ok()) << r.output;
  EXPECT_EQ(r.output, "/proc/self/fd/3\n$(id); \"\n");
}

TEST(PluginScript, MissingBashIsAnError) {
  auto o = quick();
  o.bash = "/nonexistent/bash";
  auto r = run_bash_script("true", o);
  EXPECT_FALSE(r.ok());
  EXPECT_NE(r.error.find("cannot run /nonexistent/bash"), std::string::npos) << r.error;
}

TEST(PluginScript, CancelStopsARunningScript) {
  std::atomic<bool> cancel{false};
  auto o = quick(std::chrono::seconds(60));
  o.cancel = &cancel;
  std::thread t([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    cancel = true;
  });
  const auto start = std::chrono::steady_clock::now();
  auto r = run_bash_script("sleep 60", o);
  t.join();
  EXPECT_TRUE(r.cancelled);
  EXPECT_FALSE(r.ok());
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

}  // namespace
}  // namespace gpud::plugins
