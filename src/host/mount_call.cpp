#include "host/mount_call.h"

#include <fmt/format.h>

#include <cerrno>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <system_error>
#include <thread>

namespace gpud::host {
namespace {

// One call on its own thread; the thread owns a reference, so an abandoned call stays valid.
struct PendingCall {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
};

std::mutex g_blocked_mu;
// Keys whose call has not returned: their threads are still blocked in the kernel.
std::map<std::string, std::shared_ptr<PendingCall>, std::less<>> g_blocked;

}  // namespace

std::string mount_not_answering(std::string_view mount_point, std::chrono::milliseconds deadline) {
  return fmt::format("mount {} did not answer within {:g} s", mount_point,
                     static_cast<double>(deadline.count()) / 1000.0);
}

Result<void> run_with_mount_deadline(const std::string& key, std::string_view mount_point,
                                     std::chrono::milliseconds deadline,
                                     std::function<void()> call) {
  {
    std::lock_guard lock(g_blocked_mu);
    if (auto it = g_blocked.find(key); it != g_blocked.end()) {
      std::lock_guard pending(it->second->mu);
      if (!it->second->done)
        return make_error(mount_not_answering(mount_point, deadline) + " (still)", ETIMEDOUT);
      g_blocked.erase(it);
    }
  }
  auto pending = std::make_shared<PendingCall>();
  try {
    std::thread([pending, call = std::move(call)] {
      call();
      std::lock_guard lock(pending->mu);
      pending->done = true;
      pending->cv.notify_all();
    }).detach();
  } catch (const std::system_error& e) {
    return make_error(fmt::format("{}: cannot start a thread: {}", mount_point, e.what()));
  }
  std::unique_lock lock(pending->mu);
  if (!pending->cv.wait_for(lock, deadline, [&] { return pending->done; })) {
    lock.unlock();
    std::lock_guard blocked(g_blocked_mu);
    g_blocked[key] = pending;
    return make_error(mount_not_answering(mount_point, deadline), ETIMEDOUT);
  }
  return {};
}

}  // namespace gpud::host
