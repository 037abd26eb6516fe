#include "tests/e2e/prometheus_stack.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <thread>

#include "tests/e2e/daemon_process.h"

namespace gpud::e2e {

using namespace std::chrono_literals;
using Json = nlohmann::json;

ChildProcess::ChildProcess(std::vector<std::string> args, const std::string& log_path) {
  pid_ = ::fork();
  if (pid_ == 0) {
    int fd = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(argv[0], argv.data());
    _exit(127);
  }
}

bool ChildProcess::running() {
  if (pid_ <= 0) return false;
  int status = 0;
  if (::waitpid(pid_, &status, WNOHANG) == pid_) {
    pid_ = -1;
    return false;
  }
  return true;
}

void ChildProcess::stop() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGTERM);
  for (int i = 0; i < 500; ++i) {
    if (::waitpid(pid_, nullptr, WNOHANG) == pid_) {
      pid_ = -1;
      return;
    }
    std::this_thread::sleep_for(10ms);
  }
  ::kill(pid_, SIGKILL);
  ::waitpid(pid_, nullptr, 0);
  pid_ = -1;
}

Json PrometheusApi::get(const std::string& path, const httplib::Params& params) const {
  httplib::Client cli("127.0.0.1", port_);
  cli.set_connection_timeout(2, 0);
  cli.set_read_timeout(10, 0);
  auto r = cli.Get(path, params, httplib::Headers{});
  if (!r || r->status != 200) return nullptr;
  Json doc = parse_json(r->body);
  if (!doc.is_object() || doc.value("status", "") != "success") return nullptr;
  return doc["data"];
}

Json PrometheusApi::query(const std::string& promql) const {
  Json data = get("/api/v1/query", {{"query", promql}});
  if (!data.is_object() || !data["result"].is_array()) return Json::array();
  return data["result"];
}

Json PrometheusApi::query_answer(const std::string& promql) const {
  httplib::Client cli("127.0.0.1", port_);
  cli.set_connection_timeout(2, 0);
  cli.set_read_timeout(10, 0);
  auto r = cli.Get("/api/v1/query", httplib::Params{{"query", promql}}, httplib::Headers{});
  if (!r) return nullptr;
  Json doc = parse_json(r->body);
  return doc.is_object() ? doc : nullptr;
}

double value_of(const Json& sample) { return std::stod(sample["value"][1].get<std::string>()); }

bool wait_until(std::chrono::steady_clock::time_point deadline, const std::function<bool()>& done) {
  while (std::chrono::steady_clock::now() < deadline) {
    if (done()) return true;
    std::this_thread::sleep_for(250ms);
  }
  return done();
}

std::string one_gpud_prometheus_config(const std::vector<std::string>& rule_files,
                                       const std::string& gpud_data_dir, int gpud_port,
                                       const std::string& node) {
  std::string config =
      "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n"
      "rule_files:\n";
  for (const auto& f : rule_files) config += "  - " + f + "\n";
  config +=
      "scrape_configs:\n  - job_name: gpud\n    scheme: https\n    tls_config:\n"
      "      ca_file: " +
      gpud_data_dir +
      "/gpud.crt\n      server_name: localhost\n"
      "    static_configs:\n      - targets: ['127.0.0.1:" +
      std::to_string(gpud_port) + "']\n        labels: {node: " + node + "}\n";
  return config;
}

std::vector<std::string> prometheus_command(const std::string& prometheus, const std::string& dir,
                                            int port) {
  return {prometheus, "--config.file=" + dir + "/prometheus.yml",
          "--storage.tsdb.path=" + dir + "/tsdb",
          "--web.listen-address=127.0.0.1:" + std::to_string(port)};
}

std::string xid_kmsg_record(int seq, const std::string& pci_bus_id, int xid) {
  double uptime_s = 0;
  std::ifstream("/proc/uptime") >> uptime_s;
  const long usec = static_cast<long>(uptime_s * 1e6);
  // The kernel names the device without its function: "PCI:0000:3b:00".
  const std::string device = pci_bus_id.substr(0, pci_bus_id.rfind('.'));
  return "4," + std::to_string(seq) + "," + std::to_string(usec) + ",-;NVRM: Xid (PCI:" + device +
         "): " + std::to_string(xid) + ", pid=1, name=x, test.\n";
}

}  // namespace gpud::e2e
