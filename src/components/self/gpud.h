// GpudComponent ("gpud"): gpud watching itself. Whether its store can write, what it lost or moved
// aside, whether it follows the kernel log and loses records of it, and whether NVML is loaded:
// failures that otherwise leave every other component reading Healthy on missing data.
#pragma once

#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "components/component.h"
#include "store/database.h"
#include "store/event_store.h"

namespace gpud::components {

inline constexpr std::string_view kGpudComponent = "gpud";

// What the kernel-log follower and event pipeline counted since start.
struct KernelLogCounters {
  bool followed = false;
  std::string error;  // why it is not followed
  uint64_t records = 0;
  uint64_t overruns = 0;     // records the ring overwrote before they were read
  uint64_t read_errors = 0;  // failed reads of the kernel log
  // Records a process wrote to /dev/kmsg (not the kernel), read and dropped unmatched
  // (kmsg::kernel_record). Information, never a fault: systemd and `logger --kmsg` write there.
  uint64_t foreign_records = 0;
  // Records the follower could not parse, and matched lines whose fields the pipeline could not
  // parse; absent where the daemon does not count them.
  std::optional<uint64_t> record_errors;
  std::optional<uint64_t> parse_errors;
};

// Whether a sink (docs/DESIGN.md "Sinks": Kubernetes node conditions, ...) reaches the system it
// tells. A sink that cannot makes the gpud component Degraded, never another component.
struct SinkStatus {
  std::string name;   // "kubernetes-node-conditions"
  std::string error;  // why its last attempt failed; "" while it works
};

// What the daemon hands the gpud component. Any member may be empty; the component is supported
// only where ctx.gpud points at one (the daemon), never in `gpud scan`.
struct GpudProbes {
  store::Database* db = nullptr;
  store::EventStore* events = nullptr;
  std::function<KernelLogCounters()> kernel_log;
  std::function<std::vector<SinkStatus>()> sinks;  // the sinks the daemon runs
};

// One reading of everything the rule judges.
struct GpudSnapshot {
  std::string db_path;  // empty: in memory
  store::DatabaseHealth store;
  std::optional<int64_t> db_size_bytes;
  std::vector<std::string> quarantined_files;  // <state file>.corrupt-* on disk now
  size_t event_backlog = 0;
  size_t event_backlog_capacity = 0;
  uint64_t events_dropped = 0;
  KernelLogCounters kernel_log;
  std::string nvml_status;  // "not found", "errored", "ready"; "" without an NVML source
  // NVML answered its last collection (nvml::NvidiaSource::answered_last_collection): the value
  // of gpud_nvml_up, the same as accelerator_nvidia_nvml_up's.
  bool nvml_answered = false;
  std::vector<SinkStatus> sinks;
};

// Counts acknowledged by set-healthy: a finding is reported while its count is above these.
struct GpudAcknowledged {
  uint64_t events_dropped = 0;
  size_t quarantines = 0;
  uint64_t overruns = 0;
  uint64_t read_errors = 0;
  uint64_t record_errors = 0;
  uint64_t parse_errors = 0;
};

nlohmann::json to_json(const GpudSnapshot& s);

// The rule. Unhealthy: events were lost (the backlog was full), or the store is unusable (corrupt
// and not replaced). Degraded: the store cannot write (events wait in memory, lost if gpud stops
// now), a database was quarantined, the kernel log is not followed, it lost or failed to read
// records, or a sink cannot reach its system (the reason names the sink and its last error). Lost
// events, quarantines and kernel-log losses stay reported until set-healthy acknowledges them; the
// store's state is live. NVML's state is reported, never judged here: the NVIDIA components own it.
CheckResult evaluate_gpud(const GpudSnapshot& s, const GpudAcknowledged& acknowledged,
                          TimePoint now = Clock::now());

class GpudComponent : public Component {
 public:
  explicit GpudComponent(const ComponentContext& ctx);
  std::string_view name() const override { return kGpudComponent; }
  bool supported() const override;
  // Short, so that a store that stops writing shows within seconds; a check only reads counters,
  // one directory and the database's page count.
  std::chrono::seconds interval() const override { return std::chrono::seconds(10); }
  CheckResult check() override;
  bool can_set_healthy() const override { return true; }
  // Acknowledges the lost events, quarantines and kernel-log losses counted so far.
  Result<void> set_healthy(const Acknowledgement& ack) override;

 private:
  GpudSnapshot collect() const;

  mutable std::mutex mu_;
  GpudAcknowledged acknowledged_;
};

}  // namespace gpud::components
