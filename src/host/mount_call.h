// A filesystem call on a mount point that cannot block its caller: it runs on a thread of its own,
// waited for at most a deadline; a call that does not return (blocked in the kernel on a hung NFS
// or FUSE mount) is abandoned there, and while it stays blocked a later call with the same key
// fails at once instead of starting another thread. The disk component's statvfs and the NFS probe
// use it.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <string_view>

#include "core/result.h"

namespace gpud::host {

// How long a filesystem call on a mount point may take before the mount counts as not answering.
inline constexpr std::chrono::milliseconds kMountCallDeadline{5000};

// "mount <mount_point> did not answer within <n> s".
std::string mount_not_answering(std::string_view mount_point, std::chrono::milliseconds deadline);

// Runs `call` on a thread of its own and waits for it at most `deadline`. `call` must own what it
// touches (capture shared state by shared_ptr): after a timeout it may still run. Errors: the
// timeout (mount_not_answering, with " (still)" while an earlier call with this key is blocked;
// code ETIMEDOUT) or a thread that cannot start.
[[nodiscard]] Result<void> run_with_mount_deadline(const std::string& key,
                                                   std::string_view mount_point,
                                                   std::chrono::milliseconds deadline,
                                                   std::function<void()> call);

}  // namespace gpud::host
