// XidComponent ("accelerator-nvidia-error-xid") and the pure rule over its events: GPUd's
// reboot-aware Xid state machine (fatal -> Unhealthy, critical -> Degraded, reboots clear,
// repeats escalate to HARDWARE_INSPECTION).
#pragma once

#include <atomic>
#include <functional>
#include <string>
#include <vector>

#include "catalog/nvlink_decode.h"
#include "components/component.h"
#include "core/reboot_rules.h"
#include "host/host_fs.h"
#include "kmsg/rules.h"
#include "runtimes/container_directory.h"

namespace gpud::components {

inline constexpr std::string_view kXidComponent = "accelerator-nvidia-error-xid";
inline constexpr std::string_view kSxidComponent = "accelerator-nvidia-error-sxid";

// The Xid rules of the kernel log: "NVRM: Xid (...)" lines and a lost GPU's "fallen off the bus"
// in its one- and multi-line forms (Xid 79). Stored Xids are counted per GPU, code and type
// (accelerator_nvidia_xid_errors_total) and the latest code kept
// (accelerator_nvidia_xid_last_code).
kmsg::ComponentRules xid_kernel_log_rules();

// The event an Xid becomes wherever it was seen (a kernel line, NVML's event stream): its meaning
// is looked up in the catalog here, once. `log_line` is the kernel line ("" when NVML reported
// it); `nvlink` the decoded Xid 144-150 fields when the line carried them.
kmsg::Match xid_match(int code, std::string_view pci_bus_id, std::string_view log_line,
                      const std::optional<catalog::NvlinkDecoded>& nvlink = std::nullopt,
                      nlohmann::json extra = nlohmann::json::object());
// The event an Xid from NVML's event stream becomes: the kernel line's, with source "nvml" and the
// GPU's UUID, so the deduper makes the two one event.
kmsg::Match nvml_xid_match(int code, std::string_view pci_bus_id, std::string_view uuid);

// One stored Xid/SXid event as a replay record; `code_key` is "xid" or "sxid". The reason names
// the code, mnemonic, description, bus id and UUID.
ErrorRecord to_error_record(const Event& e, std::string_view code_key);
// The extra_info values to_error_record judges by (code, first repair action, bus id, UUID), as
// JSON pointers: the keys the Xid/SXid history is digested on (digest_events).
std::vector<std::string> error_record_key_paths(std::string_view code_key);

// The Xid rule: events (any order) and reboot times -> the verdict. Xid 63/64 are skipped when the
// GPU remaps rows.
ErrorVerdict evaluate_xid(const std::vector<Event>& events, const std::vector<TimePoint>& reboots,
                          const RebootThresholds& thresholds, bool row_remapping);
ErrorVerdict evaluate_sxid(const std::vector<Event>& events, const std::vector<TimePoint>& reboots,
                           const RebootThresholds& thresholds);

// How many of the newest events the detail of an Xid/SXid state lists.
inline constexpr size_t kErrorDetailEvents = 20;

// The state "error_xid"/"error_sxid" from a verdict; `what` names the component when healthy. The
// detail gives the number of events in the lookback (`total`) and lists `newest` (newest first).
CheckResult error_check_result(std::string_view component, const ErrorVerdict& v,
                               std::string_view what, uint64_t total,
                               const std::vector<Event>& newest, TimePoint now);

// An Xid/SXid component's check: its history since `since`, digested (kernel_log_digest), judged
// by `evaluate`, or Unhealthy with the store's error when the history cannot be read.
CheckResult error_component_check(
    const ComponentContext& ctx, std::string_view component, std::string_view what, TimePoint since,
    TimePoint now,
    const std::function<ErrorVerdict(const std::vector<Event>&, const std::vector<TimePoint>&)>&
        evaluate);

// How old a kernel line may be, when read by the daemon, for its Xid's pid to be traced to a
// container: the runtimes' listing is of now, and a ring re-read after a restart must make the
// same event as before (the store deduplicates on the whole event).
inline constexpr std::chrono::seconds kXidAttributionMaxAge{120};

// Adds the container and pod of the Xid's `pid` (extra_info "pid") to the match:
// runtimes::add_attribution's keys. Only for a process that is still there and started before
// the line was logged (a pid reused since is not the one the line named); in the daemon only for
// lines at most kXidAttributionMaxAge old; never for a saved log (`saved_log`). Without such a
// process, the pod the kubelet allocated the Xid's GPU to (extra_info "gpu_uuid" looked up in the
// directory's pod-resources devices), attribution_source "pod-resources".
void attribute_xid_process(kmsg::Match& m, const kmsg::MatchTime& t, const host::HostFs& fs,
                           const runtimes::ContainerDirectory* containers, bool daemon,
                           bool saved_log);

class XidComponent : public Component {
 public:
  explicit XidComponent(const ComponentContext& ctx);
  std::string_view name() const override { return kXidComponent; }
  std::vector<std::string> tags() const override {
    return {"accelerator", "gpu", "nvidia", std::string(kXidComponent)};
  }
  bool supported() const override;
  std::chrono::seconds interval() const override { return std::chrono::seconds(30); }
  CheckResult check() override;
  bool can_set_healthy() const override { return true; }
  bool annotates_kernel_log() const override { return true; }
  void annotate_kernel_log_match(kmsg::Match& m, const kmsg::MatchTime& t) const override;

 private:
  bool row_remapping() const;
  host::HostFs fs_;
  mutable std::atomic<bool> has_events_{false};
};

}  // namespace gpud::components
