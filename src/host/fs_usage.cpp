#include "host/fs_usage.h"

#include <cerrno>
#include <cstring>
#include <memory>
#include <string>

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

Result<FsUsage> stat_fs_usage(const HostFs& fs, std::string_view mount_point,
                              std::chrono::milliseconds deadline) {
  struct Answer {
    int rc = -1;
    int err = 0;
    struct statvfs st {};
  };
  const std::string p = fs.path(mount_point);
  auto answer = std::make_shared<Answer>();
  auto r = run_with_mount_deadline(p, mount_point, deadline, [answer, p] {
    int rc;
    do {
      rc = ::statvfs(p.c_str(), &answer->st);
    } while (rc != 0 && errno == EINTR);
    answer->err = errno;
    answer->rc = rc;
  });
  if (!r) return r.error();
  if (answer->rc != 0) return make_error("statvfs " + p + ": " + std::strerror(answer->err));
  return fs_usage_from_statvfs(answer->st);
}

}  // namespace gpud::host
