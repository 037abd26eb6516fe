#include "tests/e2e/daemon_process.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "testing/emulator.h"

namespace gpud::e2e {

namespace {

std::vector<char*> argv_of(std::vector<std::string>& args) {
  std::vector<char*> out;
  for (auto& a : args) out.push_back(a.data());
  out.push_back(nullptr);
  return out;
}

int wait_for(pid_t pid, int timeout_ms) {
  for (int waited = 0; waited <= timeout_ms; waited += 10) {
    int status = 0;
    pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) {
      if (WIFEXITED(status)) return WEXITSTATUS(status);
      if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return -1;
}

}  // namespace

std::string make_temp_dir() {
  std::string tmpl = "/tmp/gpud-e2e-XXXXXX";
  char* d = ::mkdtemp(tmpl.data());
  return d != nullptr ? std::string(d) : std::string();
}

int free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  int port = ntohs(addr.sin_port);
  ::close(fd);
  return port;
}

CommandResult shell(const std::string& cmd) {
  CommandResult r;
  FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
  if (p == nullptr) return r;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  const int status = ::pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TempDirGuard::~TempDirGuard() {
  std::error_code ec;
  std::filesystem::remove_all(path, ec);
}

namespace {

// A test's gpud follows a private, empty kernel log unless the test names one (GPUD_KMSG_PATH in
// its environment or in the test process's): the machine's /dev/kmsg keeps every line until
// reboot, so what it holds (another test's Xid, an earlier run's) must not decide a verdict here.
// The one test that needs the real device says GPUD_KMSG_PATH=/dev/kmsg.
void default_private_kmsg(const std::string& private_path) {
  if (std::getenv("GPUD_KMSG_PATH") != nullptr) return;
  int fd = ::open(private_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  if (fd >= 0) ::close(fd);
  ::setenv("GPUD_KMSG_PATH", private_path.c_str(), 1);
}

}  // namespace

CommandResult run_gpud(const std::vector<std::string>& args, int timeout_s) {
  std::string out_dir = make_temp_dir();
  std::string out_path = out_dir + "/out";
  std::vector<std::string> full{GPUD_BINARY};
  full.insert(full.end(), args.begin(), args.end());
  // `run` and `scan` read the machine's /etc/gpud/gpud.yaml unless told otherwise: a test says.
  const bool reads_config = !args.empty() && (args[0] == "run" || args[0] == "scan" ||
                                              args[0] == "check" || args[0] == "s");
  if (reads_config && std::find(args.begin(), args.end(), "--config") == args.end())
    full.insert(full.begin() + 2, {"--config", ""});
  pid_t pid = ::fork();
  if (pid == 0) {
    int fd = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    default_private_kmsg(out_dir + "/kmsg");
    full = testing_support::emulated_command(std::move(full));
    auto argv = argv_of(full);
    ::execv(argv[0], argv.data());
    _exit(127);
  }
  CommandResult r;
  r.exit_code = wait_for(pid, timeout_s * 1000);
  if (r.exit_code == -1) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
  }
  std::ifstream in(out_path);
  std::stringstream ss;
  ss << in.rdbuf();
  r.out = ss.str();
  return r;
}

DaemonProcess::DaemonProcess(std::string data_dir, std::vector<std::string> extra, bool tls,
                             std::vector<std::string> env, std::string listen_host)
    : data_dir_(std::move(data_dir)), tls_(tls) {
  port_ = free_port();
  log_path_ = data_dir_ + ".log";
  std::vector<std::string> args{GPUD_BINARY,        "run",
                                "--listen-address", listen_host + ":" + std::to_string(port_),
                                "--data-dir",       data_dir_};
  if (!tls) args.push_back("--no-tls");
  // The machine's /etc/gpud/gpud.yaml (a `gpud up` here) must not change what a test starts.
  if (std::find(extra.begin(), extra.end(), "--config") == extra.end())
    args.insert(args.end(), {"--config", ""});
  // Nor the machine's docker and containerd (installed, their daemons not running, on CI): a test
  // that names no components (on the command line or in a config file) runs all but those two,
  // whose own tests start private daemons (src/runtimes/docker_module/, src/runtimes/cri_module/).
  if (std::find(extra.begin(), extra.end(), "--components") == extra.end() &&
      std::find(extra.begin(), extra.end(), "--config") == extra.end())
    args.insert(args.end(), {"--components", "-docker,-containerd"});
  args.insert(args.end(), extra.begin(), extra.end());
  auto start = std::chrono::steady_clock::now();
  pid_ = ::fork();
  if (pid_ == 0) {
    int fd = ::open(log_path_.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    for (auto& kv : env) ::putenv(kv.data());
    default_private_kmsg(data_dir_ + ".kmsg");
    args = testing_support::emulated_command(std::move(args));
    auto argv = argv_of(args);
    ::execv(argv[0], argv.data());
    _exit(127);
  }
  for (int i = 0; i < 1000; ++i) {
    auto r = get("/healthz");
    if (r && r->status == 200) {
      ready_ = true;
      ready_ms_ =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
              .count();
      break;
    }
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

DaemonProcess::~DaemonProcess() {
  if (pid_ > 0) stop(SIGKILL, 5000);
}

std::string DaemonProcess::url() const {
  return std::string(tls_ ? "https" : "http") + "://127.0.0.1:" + std::to_string(port_);
}

int DaemonProcess::stop(int sig, int timeout_ms) {
  if (pid_ <= 0) return -1;
  ::kill(pid_, sig);
  int r = wait_for(pid_, timeout_ms);
  if (r == -1) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
  pid_ = -1;
  return r;
}

std::string DaemonProcess::log() const {
  std::ifstream in(log_path_);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

httplib::Result DaemonProcess::get(const std::string& path, const httplib::Headers& headers) const {
  httplib::Client cli(url());
  cli.enable_server_certificate_verification(false);
  cli.set_connection_timeout(2, 0);
  cli.set_read_timeout(10, 0);
  return cli.Get(path, headers);
}

httplib::Result DaemonProcess::post(const std::string& path) const {
  httplib::Client cli(url());
  cli.enable_server_certificate_verification(false);
  cli.set_connection_timeout(2, 0);
  cli.set_read_timeout(10, 0);
  return cli.Post(path);
}

nlohmann::json parse_json(const std::string& body) {
  return nlohmann::json::parse(body, nullptr, false);
}

nlohmann::json component_state(const DaemonProcess& d, const std::string& component) {
  auto r = d.get("/v1/states?components=" + component);
  if (!r || r->status != 200) return nlohmann::json::object();
  auto body = parse_json(r->body);
  if (!body.is_array() || body.empty() || !body[0].is_object()) return nlohmann::json::object();
  auto states = body[0].value("states", nlohmann::json::array());
  return states.is_array() && !states.empty() && states[0].is_object() ? states[0]
                                                                       : nlohmann::json::object();
}

}  // namespace gpud::e2e
