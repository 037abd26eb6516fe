// Test helper: starts build/gpud as a child process on a free port with a temporary data dir, and
// talks to it.
#pragma once

#include <httplib.h>
#include <signal.h>
#include <sys/types.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

namespace gpud::e2e {

struct CommandResult {
  int exit_code = -1;
  std::string out;  // stdout and stderr together
};

// Runs `gpud <args>` to completion (with a timeout) and captures its output.
CommandResult run_gpud(const std::vector<std::string>& args, int timeout_s = 60);
int free_port();
std::string make_temp_dir();
// Runs `cmd` through /bin/sh and captures stdout and stderr together.
CommandResult shell(const std::string& cmd);
// The whole file ("" when it cannot be read).
std::string read_file(const std::string& path);

// Removes a directory tree when it goes out of scope. Declare it before the processes that use the
// directory, so it runs after they are gone.
struct TempDirGuard {
  std::string path;
  ~TempDirGuard();
};

class DaemonProcess {
 public:
  // Starts `gpud run --listen-address <listen_host>:<port> --data-dir <dir> <extra>`; waits for
  // /healthz on 127.0.0.1. `env` entries ("KEY=VALUE") are added to the child's environment.
  DaemonProcess(std::string data_dir, std::vector<std::string> extra = {}, bool tls = true,
                std::vector<std::string> env = {}, std::string listen_host = "127.0.0.1");
  ~DaemonProcess();
  bool ready() const { return ready_; }
  int port() const { return port_; }
  pid_t pid() const { return pid_; }
  std::string url() const;
  double ready_ms() const { return ready_ms_; }
  // Sends a signal and waits (up to timeout) for the exit; returns the exit status or -1.
  int stop(int sig = SIGTERM, int timeout_ms = 5000);
  std::string log() const;  // what the daemon wrote to stderr

  httplib::Result get(const std::string& path, const httplib::Headers& headers = {}) const;
  httplib::Result post(const std::string& path) const;

 private:
  std::string data_dir_;
  std::string log_path_;
  bool tls_;
  int port_ = 0;
  pid_t pid_ = -1;
  bool ready_ = false;
  double ready_ms_ = 0;
};

nlohmann::json parse_json(const std::string& body);

// The first state of `component` in /v1/states now; an empty object when the request fails or the
// component has none.
nlohmann::json component_state(const DaemonProcess& d, const std::string& component);

// Asks `pred` every 100 ms until it holds or `limit` has passed; its last answer.
template <typename Pred>
bool eventually(Pred&& pred, std::chrono::milliseconds limit) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return pred();
}

}  // namespace gpud::e2e
