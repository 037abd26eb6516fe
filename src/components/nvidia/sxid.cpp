#include "components/nvidia/sxid.h"

#include <fmt/format.h>

#include "components/kernel_log_support.h"
#include "core/log.h"

namespace gpud::components {

SxidComponent::SxidComponent(const ComponentContext& ctx) : Component(ctx) {
  auto t = sxid_thresholds(*ctx.config);
  if (!t) logger(kSxidComponent)->warn("{}; using the defaults", t.error().message);
  thresholds_ = t ? *t : RebootThresholds{};
}

bool SxidComponent::supported() const {
  return nvidia_kernel_log_supported(ctx(), kSxidComponent, has_events_);
}

CheckResult SxidComponent::check() {
  const TimePoint now = Clock::now();
  const TimePoint since = lookback_start(ctx(), config().sxid_lookback, now);
  std::vector<Event> events;
  if (auto ev = this->events(since, TimePoint::max()); ev) events = std::move(*ev);
  auto reboots = ctx().scan_mode ? std::vector<TimePoint>{} : reboot_times(ctx().events, since);
  ErrorVerdict v = evaluate_sxid(events, reboots, thresholds_);
  return error_check_result(kSxidComponent, v, "SXIDComponent", events, now);
}

}  // namespace gpud::components
