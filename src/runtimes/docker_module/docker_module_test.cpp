// libgpud-docker.so, loaded as gpud loads it (runtimes::DockerClient, the module beside this
// binary): the transport against a tiny fake Engine API on a unix socket (FakeDockerd.*: garbled
// answers, a daemon that hangs or hangs up), and the docker component against Debian's dockerd
// started as root on private paths (DockerDaemon.*, labelled external; skipped, saying why, where
// dockerd cannot start).
#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <thread>
#include <vector>

#include "components/containers/docker.h"
#include "components/nvidia/xid.h"
#include "host/command.h"
#include "runtimes/container_directory.h"
#include "runtimes/container_source.h"
#include "runtimes/docker.h"
#include "testing/xid_line.h"

namespace gpud {
namespace {

using namespace std::chrono_literals;
using runtimes::docker_error_kind;
using runtimes::DockerClient;
using runtimes::DockerErrorKind;

std::string make_temp_dir(const char* prefix) {
  std::string tmpl = (std::filesystem::temp_directory_path() / prefix).string() + "-XXXXXX";
  return ::mkdtemp(tmpl.data()) != nullptr ? tmpl : std::string();
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string http_answer(int status, const std::string& body,
                        const std::string& content_type = "application/json") {
  return "HTTP/1.1 " + std::to_string(status) +
         " X\r\nApi-Version: 1.41\r\nContent-Type: " + content_type +
         "\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

// A fake Engine API: for each request, `respond(request line)` gives the raw bytes to send back,
// or std::nullopt to hang (answer nothing until the server stops), or "" to hang up at once.
class FakeDockerd {
 public:
  using Responder = std::function<std::optional<std::string>(const std::string& request_line)>;

  explicit FakeDockerd(Responder respond) : respond_(std::move(respond)) {
    dir_ = make_temp_dir("gpud-fake-dockerd");
    socket_ = dir_ + "/docker.sock";
    listen_fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", socket_.c_str());
    if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
        ::listen(listen_fd_, 16) != 0)
      ADD_FAILURE() << "cannot listen on " << socket_;
    if (::pipe2(stop_, O_CLOEXEC) != 0) ADD_FAILURE() << "pipe2";
    thread_ = std::thread([this] { serve(); });
  }
  ~FakeDockerd() {
    (void)!::write(stop_[1], "x", 1);
    thread_.join();
    ::close(listen_fd_);
    ::close(stop_[0]);
    ::close(stop_[1]);
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  const std::string& socket() const { return socket_; }
  std::vector<std::string> requests() const {
    std::lock_guard lock(mu_);
    return requests_;
  }

 private:
  bool stopping(int timeout_ms) const {
    pollfd p{stop_[0], POLLIN, 0};
    return ::poll(&p, 1, timeout_ms) > 0;
  }

  void serve() {
    std::vector<int> hung;
    while (true) {
      pollfd p[2] = {{listen_fd_, POLLIN, 0}, {stop_[0], POLLIN, 0}};
      if (::poll(p, 2, -1) < 0 || (p[1].revents & POLLIN) != 0) break;
      int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) continue;
      std::string request;
      char buf[4096];
      while (request.find("\r\n\r\n") == std::string::npos) {
        pollfd r{fd, POLLIN, 0};
        if (::poll(&r, 1, 2000) <= 0) break;
        ssize_t n = ::read(fd, buf, sizeof(buf));
        if (n <= 0) break;
        request.append(buf, static_cast<size_t>(n));
      }
      std::string line = request.substr(0, request.find("\r\n"));
      {
        std::lock_guard lock(mu_);
        requests_.push_back(line);
      }
      std::optional<std::string> answer = respond_(line);
      if (!answer) {
        hung.push_back(fd);  // answered never; closed when the server stops
        continue;
      }
      for (size_t off = 0; off < answer->size();) {
        ssize_t n = ::send(fd, answer->data() + off, answer->size() - off, MSG_NOSIGNAL);
        if (n <= 0) break;
        off += static_cast<size_t>(n);
      }
      ::close(fd);
    }
    for (int fd : hung) ::close(fd);
  }

  Responder respond_;
  std::string dir_, socket_;
  int listen_fd_ = -1;
  int stop_[2] = {-1, -1};
  std::thread thread_;
  mutable std::mutex mu_;
  std::vector<std::string> requests_;
};

std::string fixture(const std::string& name) {
  return read_file(std::string(GPUD_SOURCE_DIR) + "/testing/fixtures/docker/" + name);
}

TEST(DockerModule, ExportsOnlyItsEntryPoint) {
  auto out = host::run_command({"nm", "-D", "--defined-only", GPUD_DOCKER_MODULE},
                               host::kDefaultSearchPath, 10s);
  if (!out || out->exit_code != 0) GTEST_SKIP() << "nm (binutils) could not run";
  std::istringstream lines(out->out);
  std::vector<std::string> exported;
  for (std::string line; std::getline(lines, line);) {
    std::istringstream fields(line);
    std::string addr, type, name;
    fields >> addr >> type >> name;
#if defined(GPUD_SANITIZED)
    if (name.rfind("__", 0) == 0) continue;  // the sanitizers' own glue
#endif
    if (!name.empty()) exported.push_back(name);
  }
  EXPECT_EQ(exported, std::vector<std::string>{"gpud_docker_client_v1"}) << out->out;
}

TEST(FakeDockerd, AnOlderDaemonIsAskedInItsOwnApiVersion) {
  FakeDockerd d([](const std::string& line) -> std::optional<std::string> {
    if (line.find(" /_ping ") != std::string::npos)
      return "HTTP/1.1 200 OK\r\nApi-Version: 1.40\r\nContent-Length: 2\r\n\r\nOK";
    if (line.find("/containers/json") != std::string::npos) return http_answer(200, "[]");
    return http_answer(404, R"({"message":"page not found"})");
  });
  DockerClient c(d.socket(), 2000ms);
  auto ping = c.ping();
  ASSERT_TRUE(ping) << ping.error().message;
  EXPECT_EQ(*ping, "1.40");
  auto list = c.list_containers();
  ASSERT_TRUE(list) << list.error().message;
  EXPECT_TRUE(list->empty());
  auto version = c.version();
  ASSERT_FALSE(version);
  EXPECT_EQ(docker_error_kind(version.error()), DockerErrorKind::kHttp);
  EXPECT_EQ(version.error().message,
            "Error response from daemon (404 /v1.40/version): page not found");
  auto requests = d.requests();
  ASSERT_EQ(requests.size(), 3u);
  EXPECT_EQ(requests[0], "GET /_ping HTTP/1.1");
  EXPECT_EQ(requests[1], "GET /v1.40/containers/json?all=1 HTTP/1.1");
}

TEST(FakeDockerd, AnswerThatIsNotHttpSaysSo) {
  FakeDockerd d([](const std::string&) -> std::optional<std::string> {
    return std::string("\x16\x03\x01 this is not an HTTP answer\n\n");
  });
  DockerClient c(d.socket(), 2000ms);
  auto ping = c.ping();
  ASSERT_FALSE(ping);
  EXPECT_EQ(docker_error_kind(ping.error()), DockerErrorKind::kBadResponse);
  EXPECT_NE(ping.error().message.find("the docker daemon's answer is not HTTP (unix://" +
                                      d.socket() + " GET /_ping)"),
            std::string::npos)
      << ping.error().message;
}

TEST(FakeDockerd, GarbledJsonIsABadResponseNotACrash) {
  FakeDockerd d([](const std::string& line) -> std::optional<std::string> {
    if (line.find(" /_ping ") != std::string::npos) return http_answer(200, "OK", "text/plain");
    return http_answer(200, R"([{"Id": "abc", "Names": ["/x"], )");
  });
  DockerClient c(d.socket(), 2000ms);
  ASSERT_TRUE(c.ping());
  auto list = c.list_containers();
  ASSERT_FALSE(list);
  EXPECT_EQ(docker_error_kind(list.error()), DockerErrorKind::kBadResponse);
  EXPECT_EQ(list.error().message,
            R"(the container list is not JSON: [{"Id": "abc", "Names": ["/x"],)");
  auto version = c.version();
  ASSERT_FALSE(version);
  EXPECT_NE(version.error().message.find("not a JSON object"), std::string::npos);
}

TEST(FakeDockerd, PingAnsweredWithSomethingElseThanOkFails) {
  FakeDockerd d([](const std::string&) -> std::optional<std::string> {
    return http_answer(200, "<html>proxy</html>", "text/html");
  });
  DockerClient c(d.socket(), 2000ms);
  auto ping = c.ping();
  ASSERT_FALSE(ping);
  EXPECT_EQ(ping.error().message,
            "the docker daemon answered /_ping with \"<html>proxy</html>\", not \"OK\"");
}

TEST(FakeDockerd, HungDaemonTimesOutWithinTheDeadline) {
  FakeDockerd d([](const std::string&) -> std::optional<std::string> { return std::nullopt; });
  DockerClient c(d.socket(), 300ms);
  const auto start = std::chrono::steady_clock::now();
  auto ping = c.ping();
  const auto took = std::chrono::steady_clock::now() - start;
  ASSERT_FALSE(ping);
  EXPECT_EQ(docker_error_kind(ping.error()), DockerErrorKind::kTimeout);
  EXPECT_NE(ping.error().message.find("the docker daemon did not answer within 300 ms (unix://" +
                                      d.socket() + " GET /_ping)"),
            std::string::npos)
      << ping.error().message;
  EXPECT_GE(took, 250ms);
  EXPECT_LT(took, 3s);
}

TEST(FakeDockerd, DaemonHangingUpIsAConnectionError) {
  FakeDockerd d([](const std::string&) -> std::optional<std::string> { return std::string(); });
  DockerClient c(d.socket(), 2000ms);
  auto ping = c.ping();
  ASSERT_FALSE(ping);
  EXPECT_EQ(docker_error_kind(ping.error()), DockerErrorKind::kConnect);
  EXPECT_NE(ping.error().message.find("the docker daemon closed the connection"), std::string::npos)
      << ping.error().message;
}

TEST(FakeDockerd, SocketNobodyListensOnIsRefused) {
  std::string dir = make_temp_dir("gpud-dead-dockerd");
  std::string path = dir + "/docker.sock";
  {
    // A socket file left behind by a daemon that died.
    int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", path.c_str());
    ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    ::close(fd);
  }
  DockerClient c(path, 2000ms);
  auto ping = c.ping();
  ASSERT_FALSE(ping);
  EXPECT_EQ(docker_error_kind(ping.error()), DockerErrorKind::kConnect);
  EXPECT_NE(ping.error().message.find("cannot connect to the docker daemon at unix://" + path),
            std::string::npos)
      << ping.error().message;
  std::filesystem::remove_all(dir);
}

// The component over the fake: a daemon that pings but whose list is garbled is Unhealthy, with
// the reason in `error`, and what it listed before stays published.
TEST(FakeDockerd, ComponentWithAGarbledListIsUnhealthy) {
  std::atomic<bool> garbled{false};
  FakeDockerd d([&garbled](const std::string& line) -> std::optional<std::string> {
    if (line.find(" /_ping ") != std::string::npos) return http_answer(200, "OK", "text/plain");
    if (line.find("/version") != std::string::npos)
      return http_answer(200, fixture("version-20.10.json"));
    return http_answer(200, garbled ? "[{\"Id\":" : fixture("containers-20.10.json"));
  });
  Config config;
  config.docker_socket = d.socket();
  config.executable_search_path = "/nonexistent";  // installed: the socket exists
  config.host_root = std::string(GPUD_SOURCE_DIR) + "/testing/fixtures/host/debian12";
  runtimes::ContainerDirectory directory;
  runtimes::ContainerSource source(directory);
  components::ComponentContext ctx;
  ctx.config = &config;
  ctx.containers = &directory;
  ctx.container_source = &source;
  components::DockerComponent c(ctx);
  CheckResult ok = c.check();
  EXPECT_EQ(ok.health(), Health::kHealthy) << ok.summary();
  EXPECT_EQ(ok.states[0].reason, "docker is running, 2 containers (1 running)");
  auto pod = directory.find("f37b57d424da");
  ASSERT_TRUE(pod);
  EXPECT_EQ(pod->pod_name, "job-7f9c");
  garbled = true;
  CheckResult bad = c.check();
  EXPECT_EQ(bad.health(), Health::kUnhealthy);
  EXPECT_EQ(bad.states[0].reason, "error listing docker containers");
  EXPECT_EQ(bad.states[0].error, "the container list is not JSON: [{\"Id\":");
  EXPECT_TRUE(directory.find("f37b57d424da")) << "a failed listing keeps the last one";
}

// ---- Debian's dockerd on private paths ----------------------------------------------------------

class DockerDaemon : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "dockerd needs root";
    dockerd_ = host::find_executable("dockerd", "/usr/sbin:/usr/bin:/usr/local/bin").value_or("");
    // Debian's CLI (20.10) first: another one on PATH may speak a newer API.
    docker_ = host::find_executable("docker", "/usr/bin:/usr/local/bin").value_or("");
    if (dockerd_.empty() || docker_.empty())
      GTEST_SKIP()
          << "dockerd or docker not installed (scripts/install-deps.sh installs docker.io)";
    if (!host::find_executable("python3", host::kDefaultSearchPath))
      GTEST_SKIP() << "python3 (for testing/busybox-image/make-image.py) not installed";
    if (!std::filesystem::exists("/bin/busybox"))
      GTEST_SKIP() << "/bin/busybox missing (Debian's busybox-static builds the test image)";
    tmp_ = make_temp_dir("gpud-dockerd");
    ASSERT_FALSE(tmp_.empty());
    socket_ = tmp_ + "/docker.sock";
    const std::string ns = std::filesystem::path(tmp_).filename().string();
    // No bridge or iptables rules, its own containerd (under the exec root) in its own namespace,
    // and a short shutdown so that stopping it does not wait on `sleep` ignoring SIGTERM.
    std::vector<std::string> argv = {dockerd_,
                                     "--data-root",
                                     tmp_ + "/root",
                                     "--exec-root",
                                     tmp_ + "/exec",
                                     "--pidfile",
                                     tmp_ + "/dockerd.pid",
                                     "-H",
                                     "unix://" + socket_,
                                     "--bridge=none",
                                     "--iptables=false",
                                     "--ip6tables=false",
                                     "--ip-masq=false",
                                     "--containerd-namespace",
                                     ns,
                                     "--containerd-plugins-namespace",
                                     ns + "-plugins",
                                     "--shutdown-timeout",
                                     "1",
                                     "--log-level=warn"};
    std::vector<char*> args;
    for (auto& a : argv) args.push_back(a.data());
    args.push_back(nullptr);
    const std::string log_path = tmp_ + "/dockerd.log";
    pid_ = ::fork();
    ASSERT_GE(pid_, 0);
    if (pid_ == 0) {
      ::setpgid(0, 0);
      int log = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
      ::dup2(log, 1);
      ::dup2(log, 2);
      ::execv(args[0], args.data());
      ::_exit(127);
    }
    ::setpgid(pid_, pid_);
    DockerClient probe(socket_, 1000ms);
    const auto deadline = std::chrono::steady_clock::now() + 30s;
    while (!probe.ping()) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        GTEST_SKIP() << "dockerd could not start: " << log_tail();
      }
      if (std::chrono::steady_clock::now() > deadline)
        GTEST_SKIP() << "dockerd did not answer within 30 s: " << log_tail();
      std::this_thread::sleep_for(100ms);
    }
  }

  void TearDown() override {
    stop_dockerd(SIGKILL);
    // What it left: container shims (they outlive their containerd by design) name our paths.
    for (pid_t p : processes_naming(tmp_)) ::kill(p, SIGKILL);
    if (tmp_.empty()) return;
    std::vector<std::string> mounts;
    std::istringstream lines(read_file("/proc/self/mounts"));
    for (std::string line; std::getline(lines, line);) {
      std::istringstream f(line);
      std::string dev, where;
      f >> dev >> where;
      if (where.rfind(tmp_ + "/", 0) == 0) mounts.push_back(where);
    }
    for (auto it = mounts.rbegin(); it != mounts.rend(); ++it) ::umount2(it->c_str(), MNT_DETACH);
    std::error_code ec;
    std::filesystem::remove_all(tmp_, ec);
  }

  // SIGTERM lets it stop its containers and its containerd and remove its socket.
  void stop_dockerd(int sig) {
    if (pid_ <= 0) return;
    // SIGTERM to dockerd alone (it stops its containerd itself); SIGKILL to its whole group.
    ::kill(sig == SIGTERM ? pid_ : -pid_, sig);
    const auto deadline = std::chrono::steady_clock::now() + 20s;
    int status = 0;
    while (::waitpid(pid_, &status, WNOHANG) != pid_) {
      if (std::chrono::steady_clock::now() > deadline) {
        ::kill(-pid_, SIGKILL);
        ::waitpid(pid_, &status, 0);
        break;
      }
      std::this_thread::sleep_for(50ms);
    }
    pid_ = -1;
  }

  static std::vector<pid_t> processes_naming(const std::string& path) {
    std::vector<pid_t> out;
    if (path.empty()) return out;
    for (const auto& e : std::filesystem::directory_iterator("/proc")) {
      const std::string name = e.path().filename().string();
      if (name.find_first_not_of("0123456789") != std::string::npos) continue;
      std::string cmdline = read_file(e.path().string() + "/cmdline");
      if (cmdline.find(path) != std::string::npos) out.push_back(std::stoi(name));
    }
    return out;
  }

  std::string log_tail() const {
    std::string log = read_file(tmp_ + "/dockerd.log");
    return log.size() > 600 ? log.substr(log.size() - 600) : log;
  }

  // The docker CLI against our daemon, with a deadline.
  host::CommandOutput docker(std::vector<std::string> args) {
    args.insert(args.begin(), {docker_, "-H", "unix://" + socket_});
    auto out = host::run_command(args, host::kDefaultSearchPath, 60s);
    if (!out) {
      ADD_FAILURE() << out.error().message;
      return {};
    }
    EXPECT_EQ(out->exit_code, 0) << args[3] << ": " << out->err;
    return *out;
  }

  // The busybox image loaded, and a container running `sleep 3600` with the labels Kubernetes'
  // docker integrations set; its id.
  std::string run_pod_container() {
    const std::string image = tmp_ + "/busybox.tar";
    auto made = host::run_command(
        {"python3", std::string(GPUD_SOURCE_DIR) + "/testing/busybox-image/make-image.py", image},
        host::kDefaultSearchPath, 60s);
    EXPECT_TRUE(made && made->exit_code == 0) << (made ? made->err : made.error().message);
    EXPECT_NE(docker({"load", "-i", image}).out.find("gpud-test/busybox:1"), std::string::npos);
    auto run =
        docker({"run", "-d", "--network", "none", "--name", "k8s_trainer_job-7f9c_ml-team", "-l",
                "io.kubernetes.pod.name=job-7f9c", "-l", "io.kubernetes.pod.namespace=ml-team",
                "-l", "io.kubernetes.pod.uid=0b5c2d4e-1111-2222-3333-444455556666", "-l",
                "io.kubernetes.container.name=trainer", "gpud-test/busybox:1"});
    std::string id = run.out.substr(0, run.out.find_first_of("\r\n"));
    return id;
  }

  Config config() const {
    Config c;
    c.docker_socket = socket_;
    c.executable_search_path = std::filesystem::path(dockerd_).parent_path().string() + ":" +
                               std::filesystem::path(docker_).parent_path().string();
    c.host_root = "/";
    return c;
  }

  std::string dockerd_, docker_, tmp_, socket_;
  pid_t pid_ = -1;
};

TEST_F(DockerDaemon, ListsTheContainerWithItsPodThenUnhealthyWhenStopped) {
  const std::string id = run_pod_container();
  ASSERT_EQ(id.size(), 64u) << "docker run printed: " << id;

  Config cfg = config();
  runtimes::ContainerDirectory directory;
  runtimes::ContainerSource source(directory);
  components::ComponentContext ctx;
  ctx.config = &cfg;
  ctx.containers = &directory;
  ctx.container_source = &source;
  components::DockerComponent c(ctx);
  CheckResult r = c.check();
  ASSERT_EQ(r.health(), Health::kHealthy) << r.summary() << " " << r.states[0].error;
  EXPECT_EQ(r.states[0].reason, "docker is running, 1 container (1 running)");
  auto data = r.states[0].data;
  EXPECT_EQ(data["version"].get<std::string>().substr(0, 3), "20.") << data.dump();
  ASSERT_EQ(data["containers"].size(), 1u) << data.dump();
  const auto& row = data["containers"][0];
  EXPECT_EQ(row["id"], id);
  EXPECT_EQ(row["name"], "k8s_trainer_job-7f9c_ml-team");
  EXPECT_EQ(row["image"], "gpud-test/busybox:1");
  EXPECT_EQ(row["state"], "running");
  EXPECT_EQ(row["pod_name"], "job-7f9c");
  EXPECT_EQ(row["pod_namespace"], "ml-team");
  const auto now = std::chrono::duration_cast<std::chrono::seconds>(
                       std::chrono::system_clock::now().time_since_epoch())
                       .count();
  EXPECT_LE(std::abs(now - row["created_at"].get<int64_t>()), 120) << row.dump();

  // The container's main process: its cgroup names the container, which the directory resolves
  // to the pod.
  const std::string pid = docker({"inspect", "-f", "{{.State.Pid}}", id}).out;
  const std::string cgroup = read_file("/proc/" + pid.substr(0, pid.find('\n')) + "/cgroup");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(cgroup, m, std::regex("[0-9a-f]{64}"))) << cgroup;
  EXPECT_EQ(m.str(), id) << cgroup;
  auto info = directory.find(m.str());
  ASSERT_TRUE(info);
  EXPECT_EQ(info->name, "trainer");
  EXPECT_EQ(info->pod_name, "job-7f9c");
  EXPECT_EQ(info->pod_namespace, "ml-team");
  EXPECT_EQ(info->pod_uid, "0b5c2d4e-1111-2222-3333-444455556666");
  EXPECT_EQ(info->source, "docker");

  // An Xid line naming that process is traced to its pod, as the daemon's Xid component does.
  const int64_t main_pid = std::stoll(pid);
  auto xid = testing::xid_line_now(13, main_pid);
  components::attribute_xid_process(xid.match, xid.time, host::HostFs("/"), &directory,
                                    /*daemon=*/true, /*saved_log=*/false);
  EXPECT_EQ(xid.match.extra_info.value("pod", ""), "job-7f9c") << xid.match.extra_info.dump();
  EXPECT_EQ(xid.match.extra_info.value("namespace", ""), "ml-team");
  EXPECT_EQ(xid.match.extra_info.value("container", ""), "trainer");
  EXPECT_EQ(xid.match.extra_info.value("container_id", ""), id);
  EXPECT_EQ(xid.match.extra_info.value("attribution_source", ""), "docker");

  // `gpud scan` with the fake NVML putting that process on GPU 3 names its pod (the docker
  // component lists the containers before the processes component traces them).
  const std::string scenario = tmp_ + "/scenario.json";
  std::ofstream(scenario) << R"({"count": 8, "gpus": {"3": {"processes": [{"pid": )" << main_pid
                          << R"(, "used_memory_bytes": 1073741824}]}}})";
  ::setenv("FAKE_NVML_SCENARIO", scenario.c_str(), 1);
  auto scan = host::run_command(
      {GPUD_BINARY, "scan", "--nvml-lib", GPUD_FAKE_NVML, "--docker-socket", socket_,
       "--components", "docker,accelerator-nvidia-processes", "--log-level", "error"},
      host::kDefaultSearchPath, 60s);
  ::unsetenv("FAKE_NVML_SCENARIO");
  ASSERT_TRUE(scan) << scan.error().message;
  EXPECT_NE(scan->out.find("1 GPU compute process(es) running in ml-team/job-7f9c/trainer"),
            std::string::npos)
      << scan->out << scan->err;

  // dockerd stopped: the ping fails, Unhealthy, and nothing it listed stays published.
  stop_dockerd(SIGTERM);
  CheckResult down = c.check();
  EXPECT_EQ(down.health(), Health::kUnhealthy);
  EXPECT_EQ(down.states[0].reason, "docker installed but the docker daemon is not running");
  EXPECT_NE(down.states[0].error.find("cannot connect to the docker daemon at unix://" + socket_),
            std::string::npos)
      << down.states[0].error;
  EXPECT_TRUE(directory.all().empty());
}

TEST_F(DockerDaemon, ApiVersionNewerThanTheDaemonIsHealthyNotSupported) {
  components::DockerReadOptions o;
  o.socket_path = socket_;
  o.search_path = config().executable_search_path;
  o.api_version = "1.99";
  runtimes::ContainerDirectory directory;
  runtimes::ContainerSource listings(directory);
  components::DockerSnapshot s = components::read_docker(o, listings);
  ASSERT_TRUE(s.installed);
  ASSERT_TRUE(s.ping) << s.ping.error().message;
  ASSERT_TRUE(s.containers);
  ASSERT_FALSE(*s.containers);
  CheckResult r = components::evaluate_docker(s);
  EXPECT_EQ(r.health(), Health::kHealthy);
  EXPECT_EQ(r.states[0].reason, "not supported; needs upgrading docker daemon");
  EXPECT_NE(r.states[0].error.find("client version 1.99 is too new. Maximum supported API "
                                   "version is"),
            std::string::npos)
      << r.states[0].error;
  // Asked in its own version, the same daemon lists.
  o.api_version.clear();
  s = components::read_docker(o, listings);
  EXPECT_EQ(components::evaluate_docker(s).states[0].reason,
            "docker is running, 0 containers (0 running)");
}

}  // namespace
}  // namespace gpud
