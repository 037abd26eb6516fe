#include "plugins/script_runner.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

namespace gpud::plugins {

namespace {

using SteadyClock = std::chrono::steady_clock;

// An fd closed at scope exit.
struct Fd {
  int fd = -1;
  Fd() = default;
  explicit Fd(int f) : fd(f) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { reset(); }
  void reset() {
    if (fd >= 0) ::close(fd);
    fd = -1;
  }
};

// Moves an fd to 10 or above (close-on-exec), so that the child's dup2 onto 0-3 never overwrites
// a source it has yet to copy. Takes `fd` (closed).
int high_fd(int fd) {
  if (fd < 0) return -1;
  const int high = ::fcntl(fd, F_DUPFD_CLOEXEC, 10);
  ::close(fd);
  return high;
}

bool write_all(int fd, const char* p, size_t n) {
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

}  // namespace

ScriptResult run_bash_script(const std::string& script, const ScriptOptions& options) {
  ScriptResult result;
  const auto start = SteadyClock::now();
  const auto deadline = start + options.timeout;
  auto finish = [&]() -> ScriptResult& {
    result.duration =
        std::chrono::duration_cast<std::chrono::milliseconds>(SteadyClock::now() - start);
    return result;
  };

  // The script travels as a memory file the child reads as /proc/self/fd/3: nothing on disk to
  // clean up, nothing of it on a command line.
  Fd script_fd(high_fd(static_cast<int>(::syscall(SYS_memfd_create, "gpud-plugin-script", 1U))));
  if (script_fd.fd < 0 || !write_all(script_fd.fd, script.data(), script.size()) ||
      ::lseek(script_fd.fd, 0, SEEK_SET) != 0) {
    result.error = std::string("cannot hold the script in memory: ") + std::strerror(errno);
    return finish();
  }
  int out_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0) {
    result.error = std::string("pipe: ") + std::strerror(errno);
    return finish();
  }
  Fd out_read(out_pipe[0]);
  Fd out_write(high_fd(out_pipe[1]));
  int status_pipe[2];  // the child reports a failed exec here; closed by a successful one
  if (::pipe2(status_pipe, O_CLOEXEC) != 0) {
    result.error = std::string("pipe: ") + std::strerror(errno);
    return finish();
  }
  Fd status_read(status_pipe[0]);
  Fd status_write(status_pipe[1]);
  Fd dev_null(high_fd(::open("/dev/null", O_RDONLY | O_CLOEXEC)));
  if (out_write.fd < 0 || dev_null.fd < 0) {
    result.error = std::string("cannot set up the script's stdio: ") + std::strerror(errno);
    return finish();
  }

  // Everything the child needs is built before fork: after it, only async-signal-safe calls.
  const std::string path_env = "PATH=" + (options.path.empty() ? kDefaultPath : options.path);
  const std::string name_env = "GPUD_PLUGIN_NAME=" + options.plugin_name;
  const std::string gpud_name_env = "NAME=" + options.plugin_name;
  const std::string param_env = std::string(kParamEnv) + "=" + options.plugin_param;
  const std::string par_env = "PAR=" + options.plugin_param;
  const std::string par1_env = "PAR1=" + options.plugin_param;
  const std::string root_env =
      "GPUD_HOST_ROOT=" + (options.host_root.empty() ? std::string("/") : options.host_root);
  std::vector<const char*> envp{
      path_env.c_str(),  "HOME=/",        "LANG=C.UTF-8",   name_env.c_str(), gpud_name_env.c_str(),
      param_env.c_str(), par_env.c_str(), par1_env.c_str(), root_env.c_str(), nullptr};
  const char* script_path = "/proc/self/fd/3";
  std::vector<const char*> argv{options.bash.c_str(), script_path, nullptr};
  sigset_t empty_mask;
  sigemptyset(&empty_mask);

  const pid_t pid = ::fork();
  if (pid < 0) {
    result.error = std::string("fork: ") + std::strerror(errno);
    return finish();
  }
  if (pid == 0) {
    ::setpgid(0, 0);
    // The daemon blocks SIGINT/SIGTERM and ignores SIGPIPE; the script gets the defaults.
    ::sigprocmask(SIG_SETMASK, &empty_mask, nullptr);
    ::signal(SIGPIPE, SIG_DFL);
    ::signal(SIGINT, SIG_DFL);
    ::signal(SIGTERM, SIG_DFL);
    if (::dup2(dev_null.fd, 0) < 0 || ::dup2(out_write.fd, 1) < 0 || ::dup2(out_write.fd, 2) < 0 ||
        ::dup2(script_fd.fd, 3) < 0) {
      int e = errno;
      (void)!::write(status_write.fd, &e, sizeof e);
      ::_exit(127);
    }
    // Nothing else of the daemon's (sockets, the database) reaches the script; the status pipe is
    // close-on-exec.
    if (::syscall(SYS_close_range, 4U, ~0U, 4U /* CLOSE_RANGE_CLOEXEC */) != 0) {
      for (int fd = 4; fd < 4096; ++fd)
        if (fd != status_write.fd) ::close(fd);
    }
    ::execve(argv[0], const_cast<char* const*>(argv.data()), const_cast<char* const*>(envp.data()));
    int e = errno;
    (void)!::write(status_write.fd, &e, sizeof e);
    ::_exit(127);
  }
  ::setpgid(pid, pid);  // also here, so that a kill of the group never races the child's own call
  status_write.reset();
  out_write.reset();
  script_fd.reset();
  dev_null.reset();

  std::vector<char> buf(64 * 1024);
  bool leader_exited = false;
  bool eof = false;
  int status = 0;
  while (true) {
    if (!leader_exited) {
      // WNOWAIT: bash stays a zombie until its group is killed, so the group id cannot be reused.
      siginfo_t info{};
      if (::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0 &&
          info.si_pid == pid) {
        leader_exited = true;
        ::kill(-pid, SIGKILL);  // what the script left running in its group
        while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
        }
      }
    }
    if (leader_exited && eof) break;
    const auto now = SteadyClock::now();
    if (now >= deadline) {
      // Past the deadline with bash gone, only a process that left the group holds the pipe: stop
      // reading; the run itself finished in time.
      if (!leader_exited) result.timed_out = true;
      break;
    }
    if (options.cancel != nullptr && options.cancel->load()) {
      if (!leader_exited) result.cancelled = true;
      break;
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now);
    const int wait_ms = static_cast<int>(std::min<long long>(left.count() + 1, 50));
    if (eof) {
      ::poll(nullptr, 0, std::min(wait_ms, 10));
      continue;
    }
    pollfd p{out_read.fd, POLLIN, 0};
    int r = ::poll(&p, 1, wait_ms);
    if (r <= 0) continue;
    ssize_t n = ::read(out_read.fd, buf.data(), buf.size());
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      eof = true;
      continue;
    }
    if (n == 0) {
      eof = true;
      continue;
    }
    const size_t got = static_cast<size_t>(n);
    const size_t room =
        options.max_output_bytes - std::min(options.max_output_bytes, result.output.size());
    const size_t keep = std::min(room, got);
    result.output.append(buf.data(), keep);
    result.discarded_bytes += got - keep;
  }
  if (!leader_exited) {
    ::kill(-pid, SIGKILL);
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
  }

  int exec_errno = 0;
  if (::read(status_read.fd, &exec_errno, sizeof exec_errno) == sizeof exec_errno) {
    result.error = "cannot run " + options.bash + ": " + std::strerror(exec_errno);
    result.exit_code = 127;
    return finish();
  }
  if (WIFEXITED(status))
    result.exit_code = WEXITSTATUS(status);
  else if (WIFSIGNALED(status))
    result.exit_code = 128 + WTERMSIG(status);
  return finish();
}

}  // namespace gpud::plugins
