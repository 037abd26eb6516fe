// ServingThread: runs one bound httplib::Server's accept loop on a thread of its own and stops it
// promptly; shared by the API listeners and the metrics-only listener.
#pragma once

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>

namespace gpud::server {

struct ServingThread {
  std::unique_ptr<httplib::Server> http;
  std::thread thread;
  std::atomic<bool> done{false};

  // Starts the accept loop of the already bound server; returns once httplib runs it.
  void serve() {
    httplib::Server* srv = http.get();
    std::atomic<bool>* finished = &done;
    thread = std::thread([srv, finished] {
      srv->listen_after_bind();
      *finished = true;
    });
    // stop() may only be called once httplib considers itself running.
    for (int i = 0; i < 500 && !http->is_running() && !done; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }

  void stop() {
    // httplib ignores stop() before its accept loop runs, so wait until it does (or has already
    // ended).
    while (!done) {
      if (http->is_running()) {
        http->stop();
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    if (thread.joinable()) thread.join();
  }
};

}  // namespace gpud::server
