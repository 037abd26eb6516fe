// RetiredPagesComponent ("accelerator-nvidia-retired-pages"): dynamic page retirement on GPUs
// before Ampere (Ampere and newer remap rows instead), judged with DCGM's memory-watch limits.
#pragma once

#include "components/nvidia/nvidia_component.h"
#include "components/nvidia/verdict.h"

namespace gpud::components {

inline constexpr const char* kRetiredPagesDbeEvent = "retired_pages_dbe";
// DCGM (modules/health/DcgmHealthWatch.cpp, MonitorMem).
inline constexpr uint32_t kMaxRetiredPages = 63;           // DCGM_LIMIT_MAX_RETIRED_PAGES: SBE+DBE
inline constexpr uint32_t kDbeRetiredPagesSoftLimit = 15;  // ..._SOFT_LIMIT: DBE pages
inline constexpr std::chrono::hours kDbeRetirementWindow{24 * 7};

// The DBE page count recorded per GPU (uuid) as events when it changes, read back to compute the
// weekly growth.
std::vector<Event> retired_pages_events(const nvml::NvmlSnapshot& snapshot,
                                        const std::vector<Event>& history, TimePoint now);

// The rule (pure). `history`: this component's events of the last 7 days (empty in scan mode).
// Pending retirement ⇒ Unhealthy + REBOOT_SYSTEM; SBE+DBE retired pages ≥ 63, or DBE pages > 15 and
// more than 1 new DBE page within 7 days ⇒ Unhealthy + HARDWARE_INSPECTION.
NvidiaVerdict evaluate_retired_pages(const nvml::NvmlSnapshot& snapshot,
                                     const std::vector<Event>& history);

class RetiredPagesComponent : public NvidiaComponent {
 public:
  explicit RetiredPagesComponent(const ComponentContext& ctx);
  std::string_view name() const override { return "accelerator-nvidia-retired-pages"; }
  // False on Ampere and newer, or when no GPU supports page retirement.
  bool supported() const override;
  bool can_set_healthy() const override { return true; }

 protected:
  CheckResult evaluate(const nvml::NvmlSnapshot& snapshot) override;
};

// Whether a snapshot has a GPU that retires pages (pre-Ampere and the call supported).
bool snapshot_retires_pages(const nvml::NvmlSnapshot& snapshot);

}  // namespace gpud::components
