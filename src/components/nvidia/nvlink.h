// accelerator-nvidia-nvlink: per-link NVLink state and error counters, the expected number of GPUs
// with every link active (--nvlink-expected-link-states), and the driver's post-RX-detect failure
// events the kernel-log reader records under this component.
#pragma once

#include "components/nvidia/nvidia_component.h"
#include "components/nvidia/verdict.h"
#include "kmsg/rules.h"

namespace gpud::components {

// The NVIDIA driver's failures to update an NVLink post-RX-detection link mask, in the kernel log.
kmsg::ComponentRules nvlink_kernel_log_rules();

inline constexpr std::string_view kNvlinkName = "accelerator-nvidia-nvlink";
inline constexpr std::string_view kNvlinkPostRxDetectEvent = "nvlink_post_rx_detect_failure";

// The rule (GPUd §2.2.9, in this order): a post-RX-detect failure event since boot ⇒ Unhealthy +
// REBOOT_SYSTEM; on a multi-GPU system of an NVLink product (fabric manager or fabric state), every
// GPU pair probed and none reporting NVLink P2P ⇒ Unhealthy (+ REBOOT_SYSTEM when a GPU has an
// inactive link or a pair's status is unknown); with an expectation N > 0, fewer than N GPUs with
// all links active ⇒ Unhealthy; without one, a GPU supporting NVLink with an inactive link ⇒
// Degraded. NOT_SUPPORTED on a GPU means no NVLink (not applicable).
NvidiaVerdict evaluate_nvlink(const nvml::NvmlSnapshot& snapshot, int expected_gpus_all_links,
                              const std::vector<Event>& post_rx_detect_failures);

class NvlinkComponent : public NvidiaComponent {
 public:
  explicit NvlinkComponent(const ComponentContext& ctx);
  std::string_view name() const override { return kNvlinkName; }
  // With NVML, in a kernel-log scan, or once a failure is recorded (NVML unusable since).
  bool supported() const override;

 protected:
  CheckResult evaluate(const nvml::NvmlSnapshot& snapshot) override;
  // Without a snapshot, a post-RX-detect failure is still Unhealthy + REBOOT_SYSTEM.
  void judge_without_snapshot(CheckResult& r) override;

 private:
  // The post-RX-detect failures since boot (the whole log in a scan).
  Result<std::vector<Event>> post_rx_detect_failures() const;

  mutable std::atomic<bool> has_events_{false};
};

}  // namespace gpud::components
