#include "host/fs_usage.h"

#include <fmt/format.h>

#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <system_error>
#include <thread>

namespace gpud::host {

double FsUsage::used_percent() const {
  uint64_t denom = used_bytes + available_bytes;
  if (denom == 0) return 0;
  return 100.0 * static_cast<double>(used_bytes) / static_cast<double>(denom);
}

FsUsage fs_usage_from_statvfs(const struct statvfs& st) {
  uint64_t frsize = st.f_frsize != 0 ? st.f_frsize : st.f_bsize;
  FsUsage u;
  u.total_bytes = static_cast<uint64_t>(st.f_blocks) * frsize;
  u.free_bytes = static_cast<uint64_t>(st.f_bfree) * frsize;
  u.available_bytes = static_cast<uint64_t>(st.f_bavail) * frsize;
  u.used_bytes = u.total_bytes > u.free_bytes ? u.total_bytes - u.free_bytes : 0;
  return u;
}

namespace {

// One statvfs on its own thread; the thread owns a reference, so an abandoned call stays valid.
struct PendingStat {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  int rc = -1;
  int err = 0;
  struct statvfs st {};
};

std::mutex g_blocked_mu;
// Paths whose statvfs has not returned: their threads are still blocked in the kernel.
std::map<std::string, std::shared_ptr<PendingStat>, std::less<>> g_blocked;

std::string not_answering(std::string_view mount_point, std::chrono::milliseconds deadline) {
  return fmt::format("mount {} did not answer within {:g} s", mount_point,
                     static_cast<double>(deadline.count()) / 1000.0);
}

}  // namespace

Result<FsUsage> stat_fs_usage(const HostFs& fs, std::string_view mount_point,
                              std::chrono::milliseconds deadline) {
  std::string p = fs.path(mount_point);
  {
    std::lock_guard lock(g_blocked_mu);
    if (auto it = g_blocked.find(p); it != g_blocked.end()) {
      std::lock_guard pending(it->second->mu);
      if (!it->second->done) return make_error(not_answering(mount_point, deadline) + " (still)");
      g_blocked.erase(it);
    }
  }
  auto call = std::make_shared<PendingStat>();
  try {
    std::thread([call, p] {
      struct statvfs st {};
      int rc;
      do {
        rc = ::statvfs(p.c_str(), &st);
      } while (rc != 0 && errno == EINTR);
      const int err = errno;
      std::lock_guard lock(call->mu);
      call->rc = rc;
      call->err = err;
      call->st = st;
      call->done = true;
      call->cv.notify_all();
    }).detach();
  } catch (const std::system_error& e) {
    return make_error("statvfs " + p + ": cannot start a thread: " + e.what());
  }
  std::unique_lock lock(call->mu);
  if (!call->cv.wait_for(lock, deadline, [&] { return call->done; })) {
    lock.unlock();
    std::lock_guard blocked(g_blocked_mu);
    g_blocked[p] = call;
    return make_error(not_answering(mount_point, deadline));
  }
  if (call->rc != 0) return make_error("statvfs " + p + ": " + std::strerror(call->err));
  return fs_usage_from_statvfs(call->st);
}

}  // namespace gpud::host
