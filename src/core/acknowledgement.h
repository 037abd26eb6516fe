// What set-healthy acknowledged of a component's kernel-log faults, kept across restarts: the
// boot, the position in that boot's kernel log, and the time. A record the kernel ring gives again
// after a restart is judged against it, so an acknowledged fault is not a fault again.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "core/health.h"
#include "core/result.h"

namespace gpud {

struct KernelLogWatermark {
  // The boot the acknowledgement was made in (/proc/sys/kernel/random/boot_id); "" when unknown.
  std::string boot_id;
  // Time since boot of the newest kernel-log record read when it was made; absent when none had
  // been read.
  std::optional<int64_t> boot_offset_us;
  Acknowledgement acknowledgement;  // when (wall clock), and by whom
  bool operator==(const KernelLogWatermark&) const = default;
};

// Where and when a kernel-log record happened, as far as the reader knows.
struct KernelLogPosition {
  std::string boot_id;                    // the boot being read; "" when unknown
  std::optional<int64_t> boot_offset_us;  // the record's time since boot
  std::optional<TimePoint> time;          // the record's wall-clock time
};

// Whether the record is at or before the watermark, i.e. already acknowledged. In the watermark's
// boot the time since boot decides (exact, immune to wall-clock steps); a record of another known
// boot is after it (a boot id changes only by rebooting, which empties the ring); otherwise
// the wall-clock times decide. A record with no time at all is not covered: a fault that cannot
// be placed stays a fault.
bool covers(const KernelLogWatermark& w, const KernelLogPosition& record);

// {"boot_id", "boot_offset_us" (absent when unknown), "time" (Unix seconds), "by"}.
nlohmann::json to_json(const KernelLogWatermark& w);
// The inverse; an error naming what is wrong for anything else.
[[nodiscard]] Result<KernelLogWatermark> parse_kernel_log_watermark(std::string_view text);

}  // namespace gpud
