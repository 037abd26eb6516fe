// The "cpu" component: logical cores, CPU usage between checks and load averages, from /proc.
#pragma once

#include <chrono>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>

#include "components/component.h"
#include "host/host_fs.h"
#include "host/loadavg.h"
#include "host/proc_stat.h"
#include "kmsg/rules.h"

namespace gpud::components {

// Hung tasks ("blocked for more than N seconds") and soft lockups in the kernel log.
kmsg::ComponentRules cpu_kernel_log_rules();

struct CpuSnapshot {
  int logical_cores = 0;               // 0: unknown (no cpuN lines)
  std::optional<double> used_percent;  // nullopt: no usable delta between the two samples
  host::LoadAvg load;
};

nlohmann::json to_json(const CpuSnapshot& s);

// Pure rule: Healthy with the numbers, or Unhealthy with the error when collection failed.
CheckResult evaluate_cpu(const Result<CpuSnapshot>& snapshot);

class CpuComponent : public Component {
 public:
  explicit CpuComponent(const ComponentContext& ctx);

  std::string_view name() const override { return "cpu"; }
  std::chrono::seconds interval() const override { return std::chrono::seconds(60); }
  CheckResult check() override;

  // How long the first check waits between its two samples (tests shorten it).
  void set_first_sample_delay(std::chrono::milliseconds d) { first_sample_delay_ = d; }

 private:
  Result<CpuSnapshot> collect();
  Result<host::ProcStat> read_stat() const;

  host::HostFs fs_;
  std::chrono::milliseconds first_sample_delay_{100};
  std::mutex mu_;  // guards prev_ against overlapping checks (scheduler + run_now)
  std::optional<host::CpuTimes> prev_;
  std::chrono::steady_clock::time_point prev_at_;  // when the first sample was taken
  bool checked_ = false;
};

}  // namespace gpud::components
