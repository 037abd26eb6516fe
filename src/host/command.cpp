#include "host/command.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

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
  ~Fd() { reset(); }
  void reset() {
    if (fd >= 0) ::close(fd);
    fd = -1;
  }
};

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

Result<CommandOutput> run_command(const std::vector<std::string>& argv,
                                  std::string_view search_path, std::chrono::milliseconds timeout,
                                  size_t max_output) {
  if (argv.empty()) return make_error("no command to run");
  const std::string shown = "`" + join(argv, " ") + "`";
  auto path = find_executable(argv[0], search_path);
  if (!path) return make_error(argv[0] + " not found");

  int out_pipe[2], err_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0)
    return make_error(std::string("pipe: ") + std::strerror(errno));
  Fd out_r{out_pipe[0]}, out_w{out_pipe[1]};
  if (::pipe2(err_pipe, O_CLOEXEC) != 0)
    return make_error(std::string("pipe: ") + std::strerror(errno));
  Fd err_r{err_pipe[0]}, err_w{err_pipe[1]};

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, out_w.fd, 1);
  posix_spawn_file_actions_adddup2(&actions, err_w.fd, 2);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  // The daemon blocks SIGINT/SIGTERM in every thread and ignores SIGPIPE; the child must not
  // inherit either. Its own process group lets a timeout kill whatever it started too.
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
  std::vector<std::string> args = argv;
  std::vector<char*> cargs;
  for (auto& a : args) cargs.push_back(a.data());
  cargs.push_back(nullptr);
  pid_t pid = -1;
  int rc = ::posix_spawn(&pid, path->c_str(), &actions, &attr, cargs.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  out_w.reset();
  err_w.reset();
  if (rc != 0) return make_error("cannot run " + *path + ": " + std::strerror(rc));

  CommandOutput result;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  auto left_ms = [&deadline] {
    return std::chrono::duration_cast<std::chrono::milliseconds>(deadline -
                                                                 std::chrono::steady_clock::now())
        .count();
  };
  bool timed_out = false;
  char buf[4096];
  while (out_r.fd >= 0 || err_r.fd >= 0) {
    long long left = left_ms();
    if (left <= 0) {
      timed_out = true;
      break;
    }
    pollfd p[2] = {{out_r.fd, POLLIN, 0}, {err_r.fd, POLLIN, 0}};
    int n = ::poll(p, 2, static_cast<int>(left));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) continue;  // the deadline check above ends the loop
    for (int i = 0; i < 2; ++i) {
      if (p[i].fd < 0 || p[i].revents == 0) continue;
      Fd& fd = i == 0 ? out_r : err_r;
      std::string& into = i == 0 ? result.out : result.err;
      ssize_t got = ::read(fd.fd, buf, sizeof buf);
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) {
        fd.reset();  // EOF (or a read error): the program closed this output
        continue;
      }
      size_t room = max_output > into.size() ? max_output - into.size() : 0;
      into.append(buf, std::min(room, static_cast<size_t>(got)));
    }
  }
  // Both outputs are closed; the program may still be running.
  int status = 0;
  while (!timed_out) {
    pid_t w = ::waitpid(pid, &status, WNOHANG);
    if (w == pid) break;
    if (w < 0 && errno != EINTR) break;
    if (left_ms() <= 0) {
      timed_out = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  if (timed_out) {
    ::kill(-pid, SIGKILL);
    ::kill(pid, SIGKILL);
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    return make_error(shown + " timed out after " + std::to_string(timeout.count()) + " ms",
                      kCommandTimedOut);
  }
  if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  return result;
}

}  // namespace gpud::host
