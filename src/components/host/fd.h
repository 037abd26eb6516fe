// The "fd" component: system-wide file handle usage against the kernel limit (file-nr / file-max).
#pragma once

#include <atomic>
#include <cstdint>
#include <nlohmann/json.hpp>

#include "components/component.h"
#include "host/host_fs.h"

namespace gpud::components {

inline constexpr double kFdDegradedPercent = 80.0;
inline constexpr double kFdUnhealthyPercent = 95.0;

struct FdSnapshot {
  uint64_t allocated_file_handles = 0;  // first field of /proc/sys/fs/file-nr
  uint64_t file_max = 0;                // /proc/sys/fs/file-max (file-nr's third field as fallback)

  double used_percent() const;  // allocated / file_max * 100; 0 when file_max is 0
};

nlohmann::json to_json(const FdSnapshot& s);

// Pure rule: > 95 % Unhealthy, > 80 % Degraded (both suggest checking user applications), else
// Healthy; Unhealthy with the error when collection failed.
CheckResult evaluate_fd(const Result<FdSnapshot>& snapshot);

class FdComponent : public Component {
 public:
  explicit FdComponent(const ComponentContext& ctx);

  std::string_view name() const override { return "fd"; }
  CheckResult check() override;

 private:
  Result<FdSnapshot> collect();

  host::HostFs fs_;
  std::atomic<bool> warned_file_max_{false};
};

}  // namespace gpud::components
