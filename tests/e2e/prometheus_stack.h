// Test helpers for the e2e tests that run gpud under other programs (Prometheus, Alertmanager): a
// child process that is stopped and reaped on every path out of a test, Prometheus's HTTP API, and
// polling with a deadline.
#pragma once

#include <httplib.h>
#include <sys/types.h>

#include <chrono>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/e2e/daemon_process.h"

namespace gpud::e2e {

// A child process (argv[0] is a path) with stdout and stderr appended to log_path, stopped
// (SIGTERM, then SIGKILL) and reaped by stop() or the destructor.
class ChildProcess {
 public:
  ChildProcess(std::vector<std::string> args, const std::string& log_path);
  ~ChildProcess() { stop(); }
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  bool running();
  void stop();

 private:
  pid_t pid_ = -1;
};

// Prometheus's HTTP API on 127.0.0.1:<port>.
class PrometheusApi {
 public:
  explicit PrometheusApi(int port) : port_(port) {}
  // The `data` of a successful API answer, or null.
  nlohmann::json get(const std::string& path, const httplib::Params& params = {}) const;
  // The result vector of an instant query (empty on error).
  nlohmann::json query(const std::string& promql) const;
  // The whole answer of an instant query ({"status": ..., "data"/"error": ...}), or null when
  // Prometheus did not answer: what a caller checking that a query parses needs.
  nlohmann::json query_answer(const std::string& promql) const;

 private:
  int port_;
};

// The value of one sample of an instant query's result.
double value_of(const nlohmann::json& sample);

// Polls `done` every 250 ms until it holds or the deadline passes; returns its last answer.
bool wait_until(std::chrono::steady_clock::time_point deadline, const std::function<bool()>& done);

// A Prometheus configuration that evaluates `rule_files` and scrapes one gpud (job "gpud", over
// HTTPS verified with the certificate in its data dir, label node=<node>), both every second.
std::string one_gpud_prometheus_config(const std::vector<std::string>& rule_files,
                                       const std::string& gpud_data_dir, int gpud_port,
                                       const std::string& node);

// Prometheus's command line for <dir>/prometheus.yml, its database in <dir>/tsdb, listening on
// 127.0.0.1:<port>.
std::vector<std::string> prometheus_command(const std::string& prometheus, const std::string& dir,
                                            int port);

// A raw /dev/kmsg record of an Xid on the GPU at pci_bus_id ("0000:3b:00.0"), stamped now (the
// kernel's microseconds since boot, from /proc/uptime), as a daemon following GPUD_KMSG_PATH reads
// it.
std::string xid_kmsg_record(int seq, const std::string& pci_bus_id, int xid);

}  // namespace gpud::e2e
