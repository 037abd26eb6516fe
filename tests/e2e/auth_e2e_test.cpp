// End-to-end: who may change the daemon's state, and whom the CLI believes. An unprivileged user
// (setpriv) gets 403 for what GPUd lets any local process do (forge kernel-log lines, erase fault
// history); root's CLI works without a token through the daemon's Unix socket; the admin token
// comes from a file or the environment, never argv; the CLI trusts only the daemon's certificate
// and type-checks what it is told.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>

#include "tests/e2e/daemon_process.h"

namespace gpud::e2e {
namespace {

namespace fs = std::filesystem;

constexpr const char* kToken = "e2e-admin-token-0123456789abcdef";
constexpr uid_t kNobody = 65534;

std::string quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// Why this test cannot run commands as another user, or "" when it can.
std::string why_no_setpriv() {
  if (::geteuid() != 0) return "the test does not run as root";
  if (shell("command -v setpriv").exit_code != 0) return "setpriv (util-linux) is missing";
  return "";
}

const char* kSetpriv = "setpriv --reuid=65534 --regid=65534 --clear-groups -- ";

// `cmd` run by sh as nobody (uid and gid 65534, no supplementary groups).
CommandResult as_nobody(const std::string& cmd) {
  return shell(std::string(kSetpriv) + "sh -c " + quote(cmd));
}

struct HttpAnswer {
  int status = -1;
  std::string body;
};

// A curl command that POSTs and prints the body, then the status on a line of its own.
std::string curl_post(const std::string& url, const std::string& body = "",
                      const std::string& token = "") {
  return "curl -sk --max-time 10 -X POST -H 'Content-Type: application/json' " +
         (token.empty() ? "" : "-H " + quote("Authorization: Bearer " + token) + " ") + "--data " +
         quote(body) + " -w '\\n%{http_code}' " + quote(url);
}

HttpAnswer answer_of(const CommandResult& r) {
  HttpAnswer a;
  auto nl = r.out.rfind('\n');
  if (nl == std::string::npos) return a;
  a.status = std::atoi(r.out.c_str() + nl + 1);
  a.body = r.out.substr(0, nl);
  return a;
}

// A directory everyone can read, for what nobody needs (a copy of the daemon's certificate).
std::string public_dir() {
  std::string d = make_temp_dir();
  ::chmod(d.c_str(), 0755);
  return d;
}

std::string message_of(const std::string& body) {
  auto doc = parse_json(body);
  return doc.is_object() ? doc.value("message", "") : "";
}

TEST(AuthE2E, UnprivilegedUsersCannotForgeKernelLinesOrEraseFaultHistory) {
  if (auto why = why_no_setpriv(); !why.empty())
    GTEST_SKIP() << "cannot run commands as another user: " << why;
  const std::string dir = make_temp_dir();
  const std::string kmsg = dir + "/kmsg";
  std::ofstream(kmsg).flush();
  // Dual-stack where the host has IPv6: IPv4 clients then arrive as ::ffff:127.0.0.1.
  const bool ipv6 = fs::exists("/proc/net/if_inet6");
  DaemonProcess d(dir + "/data", {"--enable-fault-injection", "--components", "cpu,memory"}, true,
                  {"GPUD_KMSG_PATH=" + kmsg}, ipv6 ? "[::]" : "127.0.0.1");
  ASSERT_TRUE(d.ready()) << d.log();
  const std::string v4 = "https://127.0.0.1:" + std::to_string(d.port());
  std::vector<std::string> bases{v4};
  if (ipv6) bases.push_back("https://[::1]:" + std::to_string(d.port()));

  for (const auto& base : bases) {
    auto xid = answer_of(
        as_nobody(curl_post(base + "/inject-fault", R"({"xid":{"id":79,"pci":"0000:3b:00.0"}})")));
    EXPECT_EQ(xid.status, 403) << base << ": " << xid.body;
    EXPECT_NE(message_of(xid.body).find("runs as uid 65534"), std::string::npos) << xid.body;
    auto emerg = answer_of(as_nobody(curl_post(
        base + "/inject-fault",
        R"({"kernel_message":{"priority":"KERN_EMERG","message":"NVRM: Xid (PCI:0000:3b:00): 79"}})")));
    EXPECT_EQ(emerg.status, 403) << base << ": " << emerg.body;
    auto erase = answer_of(as_nobody(curl_post(base + "/v1/health-states/set-healthy")));
    EXPECT_EQ(erase.status, 403) << base << ": " << erase.body;
  }
  EXPECT_EQ(read_file(kmsg), "") << "a refused request wrote the kernel log";

  // The very same requests from root succeed: the peer's user made the difference.
  auto root_xid = answer_of(
      shell(curl_post(v4 + "/inject-fault", R"({"xid":{"id":79,"pci":"0000:3b:00.0"}})")));
  EXPECT_EQ(root_xid.status, 200) << root_xid.body << "\n" << d.log();
  EXPECT_NE(read_file(kmsg).find("Xid (PCI:0000:3b:00): 79"), std::string::npos);
  auto root_erase = answer_of(shell(curl_post(v4 + "/v1/health-states/set-healthy")));
  EXPECT_EQ(root_erase.status, 200) << root_erase.body;
  d.stop();
  fs::remove_all(dir);
}

TEST(AuthE2E, FaultInjectionIsOffUnlessTheDaemonEnablesIt) {
  const std::string dir = make_temp_dir();
  const std::string kmsg = dir + "/kmsg";
  std::ofstream(kmsg).flush();
  DaemonProcess d(dir + "/data", {"--components", "cpu"}, true, {"GPUD_KMSG_PATH=" + kmsg});
  ASSERT_TRUE(d.ready()) << d.log();
  auto r = answer_of(shell(curl_post(d.url() + "/inject-fault", R"({"xid":{"id":79}})")));
  EXPECT_EQ(r.status, 403) << r.body;
  EXPECT_NE(message_of(r.body).find("--enable-fault-injection"), std::string::npos) << r.body;
  EXPECT_EQ(read_file(kmsg), "");
  d.stop();
  fs::remove_all(dir);
}

TEST(AuthE2E, RootsCliNeedsNoTokenOtherUsersAreRefused) {
  const std::string dir = make_temp_dir();
  const std::string data = dir + "/data";
  DaemonProcess d(data, {"--components", "cpu,memory"});
  ASSERT_TRUE(d.ready()) << d.log();
  const std::string socket = data + "/run/gpud.sock";

  // The CLI finds the daemon's socket through --data-dir and needs no certificate or token there.
  auto st = run_gpud({"status", "--data-dir", data});
  EXPECT_TRUE(st.exit_code == 0 || st.exit_code == 1) << st.out;
  EXPECT_NE(st.out.find("gpud is running at unix:" + socket), std::string::npos) << st.out;
  auto local = run_gpud({"set-healthy", "memory", "--data-dir", data});
  EXPECT_EQ(local.exit_code, 0) << local.out << d.log();
  EXPECT_NE(local.out.find("successfully set components to healthy: memory"), std::string::npos)
      << local.out;
  // Over TCP the daemon finds root in the socket tables; the CLI verifies the data dir's
  // certificate.
  auto tcp = run_gpud({"set-healthy", "memory", "--data-dir", data, "--server", d.url()});
  EXPECT_EQ(tcp.exit_code, 0) << tcp.out;

  if (auto why = why_no_setpriv(); !why.empty()) {
    d.stop();
    fs::remove_all(dir);
    GTEST_SKIP() << "root's CLI works; other users not tried: " << why;
  }
  // nobody cannot open the socket (0600 in a 0700 directory) ...
  auto sock = as_nobody("curl -s --max-time 5 --unix-socket " + quote(socket) +
                        " -X POST http://localhost/v1/health-states/set-healthy");
  EXPECT_EQ(sock.exit_code, 7) << "curl: expected \"couldn't connect\"\n" << sock.out;
  // ... and over TCP its CLI is told why it is refused, with exit code 2.
  const std::string pub = public_dir();
  fs::copy_file(data + "/gpud.crt", pub + "/gpud.crt");
  ::chmod((pub + "/gpud.crt").c_str(), 0644);
  auto refused = as_nobody(std::string(GPUD_BINARY) + " set-healthy memory --server " + d.url() +
                           " --ca " + pub + "/gpud.crt");
  EXPECT_EQ(refused.exit_code, 2) << refused.out;
  EXPECT_NE(refused.out.find("HTTP 403"), std::string::npos) << refused.out;
  EXPECT_NE(refused.out.find("runs as uid 65534"), std::string::npos) << refused.out;
  d.stop();
  fs::remove_all(dir);
  fs::remove_all(pub);
}

TEST(AuthE2E, AdminTokenComesFromAFileOrTheEnvironmentNeverArgv) {
  const std::string dir = make_temp_dir();
  // On the command line: refused, saying where the token goes; the daemon does not start.
  auto argv = run_gpud({"run", "--data-dir", dir + "/argv", "--admin-token", kToken});
  EXPECT_EQ(argv.exit_code, 2) << argv.out;
  EXPECT_NE(argv.out.find("--admin-token-file"), std::string::npos) << argv.out;
  EXPECT_NE(argv.out.find("GPUD_ADMIN_TOKEN"), std::string::npos) << argv.out;
  EXPECT_FALSE(fs::exists(dir + "/argv/gpud.state")) << argv.out;

  const std::string token_file = dir + "/admin-token";
  std::ofstream(token_file) << kToken << "\n";
  ::chmod(token_file.c_str(), 0644);
  auto open = run_gpud({"run", "--data-dir", dir + "/open", "--admin-token-file", token_file});
  EXPECT_EQ(open.exit_code, 2) << open.out;
  EXPECT_NE(open.out.find("chmod 600"), std::string::npos) << open.out;
  ::chmod(token_file.c_str(), 0600);

  DaemonProcess from_file(dir + "/file",
                          {"--components", "memory", "--admin-token-file", token_file});
  ASSERT_TRUE(from_file.ready()) << from_file.log();
  DaemonProcess from_env(dir + "/env", {"--components", "memory"}, true,
                         {std::string("GPUD_ADMIN_TOKEN=") + kToken});
  ASSERT_TRUE(from_env.ready()) << from_env.log();
  for (const DaemonProcess* d : {&from_file, &from_env}) {
    std::string cmdline = read_file("/proc/" + std::to_string(d->pid()) + "/cmdline");
    EXPECT_EQ(cmdline.find(kToken), std::string::npos) << "the token is in argv";
  }
  if (auto why = why_no_setpriv(); !why.empty()) {
    fs::remove_all(dir);
    GTEST_SKIP() << "token sources checked; their use by another user not tried: " << why;
  }
  const std::string pub = public_dir();
  for (const auto& [d, name] : {std::pair{&from_file, "file"}, std::pair{&from_env, "env"}}) {
    const std::string url = d->url() + "/v1/health-states/set-healthy?components=memory";
    auto without = answer_of(as_nobody(curl_post(url)));
    EXPECT_EQ(without.status, 403) << name << ": " << without.body;
    auto wrong = answer_of(as_nobody(curl_post(url, "", std::string(kToken) + "x")));
    EXPECT_EQ(wrong.status, 403) << name << ": " << wrong.body;
    auto with = answer_of(as_nobody(curl_post(url, "", kToken)));
    EXPECT_EQ(with.status, 200) << name << ": " << with.body;
    // nobody's CLI, given the token in its environment and the certificate to trust.
    const std::string crt = pub + "/" + name + ".crt";
    fs::copy_file(dir + "/" + name + "/gpud.crt", crt);
    ::chmod(crt.c_str(), 0644);
    auto cli = as_nobody(std::string("GPUD_ADMIN_TOKEN=") + kToken + " " + GPUD_BINARY +
                         " set-healthy memory --server " + d->url() + " --ca " + crt);
    EXPECT_EQ(cli.exit_code, 0) << name << ": " << cli.out;
  }
  from_file.stop();
  from_env.stop();
  fs::remove_all(dir);
  fs::remove_all(pub);
}

// Starts `gpud run` as nobody when possible (else as this user) on 127.0.0.1:port with its own
// data dir, and waits until it answers.
class Impostor {
 public:
  Impostor(int port, bool tls) : dir_(make_temp_dir()) {
    const bool drop = why_no_setpriv().empty();
    if (drop) ::chown(dir_.c_str(), kNobody, kNobody);
    std::string cmd =
        std::string(drop ? kSetpriv : "") + GPUD_BINARY +
        " run --components cpu --api-socket '' --listen-address 127.0.0.1:" + std::to_string(port) +
        " --data-dir " + dir_ + "/data" + (tls ? "" : " --no-tls");
    pid_ = ::fork();
    if (pid_ == 0) {
      int fd = ::open((dir_ + ".log").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      ::dup2(fd, 1);
      ::dup2(fd, 2);
      ::execl("/bin/sh", "sh", "-c", ("exec " + cmd).c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    httplib::Client cli((tls ? "https://127.0.0.1:" : "http://127.0.0.1:") + std::to_string(port));
    cli.enable_server_certificate_verification(false);
    for (int i = 0; i < 1000 && !ready_; ++i) {
      auto r = cli.Get("/healthz");
      ready_ = r && r->status == 200;
      if (!ready_) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  ~Impostor() {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    fs::remove_all(dir_);
    fs::remove(dir_ + ".log");
  }
  bool ready() const { return ready_; }
  std::string log() const { return read_file(dir_ + ".log"); }

 private:
  std::string dir_;
  pid_t pid_ = -1;
  bool ready_ = false;
};

TEST(CliE2E, AnImpostorOnTheDaemonsPortIsNotBelieved) {
  const std::string dir = make_temp_dir();
  const std::string data = dir + "/data";
  {
    DaemonProcess d(data, {"--components", "cpu"});
    ASSERT_TRUE(d.ready()) << d.log();
    ASSERT_EQ(d.stop(), 0);
  }
  ASSERT_TRUE(fs::exists(data + "/gpud.crt"));
  EXPECT_FALSE(fs::exists(data + "/run/gpud.sock")) << "the socket outlived the daemon";

  // While the daemon is down another process takes its port and answers as gpud would (it is
  // one), with a certificate of its own.
  const int port = free_port();
  {
    Impostor tls(port, true);
    ASSERT_TRUE(tls.ready()) << tls.log();
    const std::string url = "https://127.0.0.1:" + std::to_string(port);
    auto st = run_gpud({"status", "--data-dir", data, "--server", url});
    EXPECT_EQ(st.exit_code, 2) << st.out;
    EXPECT_NE(st.out.find("not a gpud this CLI trusts"), std::string::npos) << st.out;
    EXPECT_EQ(st.out.find("gpud is running"), std::string::npos) << st.out;
    EXPECT_EQ(st.out.find("Healthy"), std::string::npos) << st.out;
    auto sh = run_gpud({"set-healthy", "--data-dir", data, "--server", url});
    EXPECT_EQ(sh.exit_code, 2) << sh.out;
  }
  {
    // Plain HTTP on the port: no silent fallback from https.
    Impostor plain(port, false);
    ASSERT_TRUE(plain.ready()) << plain.log();
    auto st = run_gpud(
        {"status", "--data-dir", data, "--server", "https://127.0.0.1:" + std::to_string(port)});
    EXPECT_EQ(st.exit_code, 2) << st.out;
    EXPECT_NE(st.out.find("TLS handshake"), std::string::npos) << st.out;
    EXPECT_EQ(st.out.find("gpud is running"), std::string::npos) << st.out;
  }
  fs::remove_all(dir);
}

// A stand-in daemon on a Unix socket whose answers the test chooses.
class FakeDaemon {
 public:
  explicit FakeDaemon(const std::string& path) {
    http_.set_address_family(AF_UNIX);
    http_.Get("/healthz", [this](const httplib::Request&, httplib::Response& res) {
      std::lock_guard lock(mu_);
      res.set_content(healthz_, "application/json");
    });
    http_.Get("/v1/states", [this](const httplib::Request&, httplib::Response& res) {
      std::lock_guard lock(mu_);
      res.set_content(states_, "application/json");
    });
    http_.Post("/v1/health-states/set-healthy",
               [this](const httplib::Request&, httplib::Response& res) {
                 std::lock_guard lock(mu_);
                 res.set_content(set_healthy_, "application/json");
               });
    bound_ = http_.bind_to_port(path, 1);
    thread_ = std::thread([this] { http_.listen_after_bind(); });
    while (bound_ && !http_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  ~FakeDaemon() {
    http_.stop();
    thread_.join();
  }
  bool bound() const { return bound_; }
  void answer(std::string healthz, std::string states, std::string set_healthy) {
    std::lock_guard lock(mu_);
    healthz_ = std::move(healthz);
    states_ = std::move(states);
    set_healthy_ = std::move(set_healthy);
  }

 private:
  httplib::Server http_;
  std::thread thread_;
  std::mutex mu_;
  std::string healthz_, states_, set_healthy_;
  bool bound_ = false;
};

TEST(CliE2E, UnexpectedAnswersExitTwoWithAMessage) {
  const std::string dir = make_temp_dir();
  const std::string path = dir + "/gpud.sock";
  FakeDaemon fake(path);
  ASSERT_TRUE(fake.bound());
  const std::string ok = R"({"status":"ok","version":"v1"})";
  const std::string healthy =
      R"([{"component":"cpu","states":[{"health":"Healthy","reason":"ok"}]}])";
  const std::string done = R"({"code":200,"message":"done","successful":["cpu"],"failed":{}})";

  // Well-formed answers work, so what fails below fails for its content.
  fake.answer(ok, healthy, done);
  auto good = run_gpud({"status", "--api-socket", path});
  EXPECT_EQ(good.exit_code, 0) << good.out;
  EXPECT_NE(good.out.find("✔ cpu"), std::string::npos) << good.out;
  auto set = run_gpud({"set-healthy", "cpu", "--api-socket", path});
  EXPECT_EQ(set.exit_code, 0) << set.out;

  struct Case {
    std::string healthz, states, set_healthy, says;
  };
  for (const Case& c : std::vector<Case>{
           {"<html>", healthy, done, "not JSON"},
           {R"({"status":1})", healthy, done, "\"status\" is not a string"},
           {ok, R"({"cpu":"Healthy"})", done, "not an array"},
           {ok, R"([{"component":"cpu","states":[{"health":5}]}])", done, "is not a string"},
           {ok, R"([{"component":"cpu","states":[{"health":"Fine"}]}])", done, "unknown health"},
           {ok, R"([{"component":"cpu","states":"Healthy"}])", done, "no \"states\" array"},
           {ok, "[1]", done, "is not an object"},
       }) {
    fake.answer(c.healthz, c.states, c.set_healthy);
    auto r = run_gpud({"status", "--api-socket", path});
    EXPECT_EQ(r.exit_code, 2) << c.states << "\n" << r.out;
    EXPECT_NE(r.out.find(c.says), std::string::npos) << c.states << "\n" << r.out;
    EXPECT_EQ(r.out.find("terminate"), std::string::npos) << r.out;
  }
  for (const std::string& reply :
       {std::string(R"({"message":"x","successful":"cpu","failed":{}})"),
        std::string(R"({"message":"x","successful":["cpu"],"failed":{"disk":1}})"),
        std::string(R"(["cpu"])"), std::string("ok")}) {
    fake.answer(ok, healthy, reply);
    auto r = run_gpud({"set-healthy", "cpu", "--api-socket", path});
    EXPECT_EQ(r.exit_code, 2) << reply << "\n" << r.out;
    EXPECT_NE(r.out.find("not what gpud serves"), std::string::npos) << reply << "\n" << r.out;
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace gpud::e2e
