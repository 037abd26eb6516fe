#include "plugins/script_runner.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "host/command.h"

namespace gpud::plugins {

namespace {

// An fd closed at scope exit.
struct Fd {
  int fd = -1;
  explicit Fd(int f) : fd(f) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

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
  const auto start = std::chrono::steady_clock::now();
  auto finish = [&]() -> ScriptResult& {
    result.duration = std::chrono::duration_cast<std::chrono::milliseconds>(
        std::chrono::steady_clock::now() - start);
    return result;
  };

  // The script travels as a memory file the child reads as /proc/self/fd/3: nothing on disk to
  // clean up, nothing of it on a command line.
  Fd script_fd(::memfd_create("gpud-plugin-script", MFD_CLOEXEC));
  if (script_fd.fd < 0 || !write_all(script_fd.fd, script.data(), script.size()) ||
      ::lseek(script_fd.fd, 0, SEEK_SET) != 0) {
    result.error = std::string("cannot hold the script in memory: ") + std::strerror(errno);
    return finish();
  }

  const std::string path =
      options.path.empty() ? std::string(host::kDefaultSearchPath) : options.path;
  host::ProcessSpec spec;
  spec.argv = {options.bash, "/proc/self/fd/3"};
  spec.search_path = path;
  spec.timeout = options.timeout;
  spec.max_output = options.max_output_bytes;
  spec.merge_stderr = true;
  spec.environment = std::vector<std::string>{
      "PATH=" + path,
      "HOME=/",
      "LANG=C.UTF-8",
      "GPUD_PLUGIN_NAME=" + options.plugin_name,
      "NAME=" + options.plugin_name,
      std::string(kParamEnv) + "=" + options.plugin_param,
      "PAR=" + options.plugin_param,
      "PAR1=" + options.plugin_param,
      "GPUD_HOST_ROOT=" + (options.host_root.empty() ? std::string("/") : options.host_root)};
  spec.fd3 = script_fd.fd;
  spec.cancel = options.cancel;

  auto run = host::run_process(spec);
  if (!run) {
    result.error = "cannot run " + options.bash + ": " + run.error().message;
    result.exit_code = 127;
    return finish();
  }
  result.output = std::move(run->out);
  result.discarded_bytes = run->discarded_bytes;
  result.timed_out = run->timed_out;
  result.cancelled = run->cancelled;
  result.exit_code = run->term_signal != 0 ? 128 + run->term_signal : run->exit_code;
  return finish();
}

}  // namespace gpud::plugins
