#include "host/command.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/strings.h"

extern char** environ;

namespace gpud::host {

namespace {

bool is_executable_file(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

// Closes a file descriptor once, on scope exit or on demand.
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

// A close-on-exec copy of `fd` numbered 10 or above (-1 on failure); `fd` stays open.
int high_fd(int fd) { return fd < 0 ? -1 : ::fcntl(fd, F_DUPFD_CLOEXEC, 10); }

// The non-empty directories of a colon-separated search path, in order.
std::vector<std::string_view> search_dirs(std::string_view search_path) {
  std::vector<std::string_view> dirs;
  size_t start = 0;
  while (start <= search_path.size()) {
    size_t colon = search_path.find(':', start);
    if (colon == std::string_view::npos) colon = search_path.size();
    if (colon > start) dirs.push_back(search_path.substr(start, colon - start));
    start = colon + 1;
  }
  return dirs;
}

}  // namespace

std::optional<std::string> find_executable(std::string_view name, std::string_view search_path) {
  if (name.empty()) return std::nullopt;
  if (name.find('/') != std::string_view::npos) {
    std::string p(name);
    if (is_executable_file(p)) return p;
    return std::nullopt;
  }
  for (std::string_view dir : search_dirs(search_path)) {
    std::string p(dir);
    if (p.back() != '/') p += '/';
    p += name;
    if (is_executable_file(p)) return p;
  }
  return std::nullopt;
}

std::optional<std::string> find_host_executable(std::string_view host_root, std::string_view name,
                                                std::string_view search_path,
                                                const std::vector<std::string>& host_roots_within) {
  if (auto own = find_executable(name, search_path)) return own;
  std::string root(host_root);
  while (root.size() > 1 && root.back() == '/') root.pop_back();
  if (root.empty() || root == "/" || name.empty() || name.find('/') != std::string_view::npos)
    return std::nullopt;
  std::vector<std::string> roots = {root};
  for (const std::string& within : host_roots_within) roots.push_back(root + within);
  for (const std::string& r : roots)
    for (std::string_view dir : search_dirs(kDefaultSearchPath)) {
      const std::string p = r + std::string(dir) + "/" + std::string(name);
      struct stat st {};
      if (::lstat(p.c_str(), &st) != 0) continue;
      if (S_ISLNK(st.st_mode) || is_executable_file(p)) return p;
    }
  return std::nullopt;
}

Result<CommandOutput> run_process(const ProcessSpec& spec) {
  if (spec.argv.empty()) return make_error("no command to run");
  auto path = find_executable(spec.argv[0], spec.search_path);
  if (!path) return make_error(spec.argv[0] + " not found");

  // Every descriptor the child receives is first moved to 10 or above (close-on-exec), so that its
  // dup2 onto 0-3 never overwrites a source it has yet to copy.
  int out_pipe[2], err_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0)
    return make_error(std::string("pipe: ") + std::strerror(errno));
  Fd out_r{out_pipe[0]}, out_w{high_fd(out_pipe[1])};
  ::close(out_pipe[1]);
  Fd err_r, err_w;
  if (!spec.merge_stderr) {
    if (::pipe2(err_pipe, O_CLOEXEC) != 0)
      return make_error(std::string("pipe: ") + std::strerror(errno));
    err_r.fd = err_pipe[0];
    err_w.fd = high_fd(err_pipe[1]);
    ::close(err_pipe[1]);
  }
  Fd fd3;
  if (spec.fd3 >= 0) fd3.fd = high_fd(spec.fd3);
  if (out_w.fd < 0 || (!spec.merge_stderr && err_w.fd < 0) || (spec.fd3 >= 0 && fd3.fd < 0))
    return make_error(std::string("cannot set up the program's descriptors: ") +
                      std::strerror(errno));

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, out_w.fd, 1);
  posix_spawn_file_actions_adddup2(&actions, spec.merge_stderr ? out_w.fd : err_w.fd, 2);
  if (fd3.fd >= 0) posix_spawn_file_actions_adddup2(&actions, fd3.fd, 3);
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 34))
  // Nothing else of the daemon's (sockets, the database) reaches the program, even a descriptor
  // some library opened without close-on-exec.
  posix_spawn_file_actions_addclosefrom_np(&actions, fd3.fd >= 0 ? 4 : 3);
#endif
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  // The daemon blocks SIGINT/SIGTERM in every thread and ignores SIGPIPE; the child must not
  // inherit either. Its own process group lets the deadline kill whatever it started too.
  sigset_t none, defaults;
  sigemptyset(&none);
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGPIPE);
  sigaddset(&defaults, SIGINT);
  sigaddset(&defaults, SIGTERM);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setflags(&attr,
                           POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP);
  std::vector<std::string> args = spec.argv;
  std::vector<char*> cargs;
  for (auto& a : args) cargs.push_back(a.data());
  cargs.push_back(nullptr);
  std::vector<std::string> env_strings;
  std::vector<char*> cenv;
  if (spec.environment) {
    env_strings = *spec.environment;
    for (auto& e : env_strings) cenv.push_back(e.data());
    cenv.push_back(nullptr);
  }
  const auto start = std::chrono::steady_clock::now();
  pid_t pid = -1;
  int rc = ::posix_spawn(&pid, path->c_str(), &actions, &attr, cargs.data(),
                         spec.environment ? cenv.data() : environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  out_w.reset();
  err_w.reset();
  fd3.reset();
  if (rc != 0) return make_error("cannot run " + *path + ": " + std::strerror(rc));

  CommandOutput result;
  const auto deadline = start + spec.timeout;
  std::vector<char> buf(64 * 1024);
  size_t kept_out = 0, kept_err = 0;
  bool leader_exited = false;
  int status = 0;
  while (true) {
    if (!leader_exited) {
      // WNOWAIT: the leader stays a zombie until its group is killed, so the group id cannot be
      // reused by then.
      siginfo_t info{};
      if (::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0 &&
          info.si_pid == pid) {
        leader_exited = true;
        ::kill(-pid, SIGKILL);  // what it left running in its group
        while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
        }
      }
    }
    const bool eof = out_r.fd < 0 && err_r.fd < 0;
    if (leader_exited && eof) break;
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) {
      // Past the deadline with the leader gone, only a process that left the group holds a pipe:
      // stop reading; the run itself finished in time.
      if (!leader_exited) result.timed_out = true;
      break;
    }
    if (spec.cancel != nullptr && spec.cancel->load()) {
      if (!leader_exited) result.cancelled = true;
      break;
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now);
    const int wait_ms = static_cast<int>(std::min<long long>(left.count() + 1, 50));
    if (eof) {
      ::poll(nullptr, 0, std::min(wait_ms, 10));
      continue;
    }
    pollfd p[2] = {{out_r.fd, POLLIN, 0}, {err_r.fd, POLLIN, 0}};  // poll skips a negative fd
    if (::poll(p, 2, wait_ms) <= 0) continue;
    for (int i = 0; i < 2; ++i) {
      if (p[i].fd < 0 || p[i].revents == 0) continue;
      Fd& fd = i == 0 ? out_r : err_r;
      std::string& into = i == 0 ? result.out : result.err;
      size_t& kept = i == 0 ? kept_out : kept_err;
      ssize_t got = ::read(fd.fd, buf.data(), buf.size());
      if (got < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      if (got <= 0) {
        fd.reset();  // EOF (or a read error): the program closed this output
        continue;
      }
      const size_t n = static_cast<size_t>(got);
      const size_t keep = std::min(spec.max_output - std::min(spec.max_output, kept), n);
      into.append(buf.data(), keep);
      kept += keep;
      result.discarded_bytes += n - keep;
    }
  }
  if (!leader_exited) {
    ::kill(-pid, SIGKILL);
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
  }
  if (WIFEXITED(status)) {
    result.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    result.term_signal = WTERMSIG(status);
  }
  result.duration = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - start);
  return result;
}

Result<CommandOutput> run_command(const std::vector<std::string>& argv,
                                  std::string_view search_path, std::chrono::milliseconds timeout,
                                  size_t max_output, const std::atomic<bool>* cancel) {
  ProcessSpec spec;
  spec.argv = argv;
  spec.search_path = std::string(search_path);
  spec.timeout = timeout;
  spec.max_output = max_output;
  spec.cancel = cancel;
  auto r = run_process(spec);
  if (!r) return r.error();
  const std::string shown = "`" + join(argv, " ") + "`";
  if (r->timed_out)
    return make_error(shown + " timed out after " + std::to_string(timeout.count()) + " ms",
                      kCommandTimedOut);
  if (r->cancelled) return make_error(shown + " was cancelled", kCommandCancelled);
  return r;
}

}  // namespace gpud::host
