// FuseComponent ("fuse"): each FUSE connection's queue against its congestion threshold and its
// max-background limit (/sys/fs/fuse/connections), with GPUd's gauges and its fuse_connections
// event.
#pragma once

#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "components/component.h"
#include "host/fuse.h"
#include "host/host_fs.h"

namespace gpud::components {

// GPUd's thresholds: waiting requests at this share of congestion_threshold / max_background.
inline constexpr double kFuseCongestedPercent = 90.0;
inline constexpr double kFuseMaxBackgroundPercent = 80.0;
inline constexpr const char* kFuseEventName = "fuse_connections";

// waiting / congestion_threshold * 100; nullopt when either is unknown or the threshold is 0.
std::optional<double> fuse_congested_percent(const host::FuseConnection& c);
// waiting / max_background * 100; nullopt likewise.
std::optional<double> fuse_max_background_percent(const host::FuseConnection& c);
// At or over either threshold.
bool fuse_congested(const host::FuseConnection& c);
// What the gauges and the event call a connection: the mount's source, else its id.
std::string fuse_device_name(const host::FuseConnection& c);

nlohmann::json to_json(const host::FuseConnections& s);

// The rule: the connections directory unreadable, or a connection whose files are missing or
// garbled ⇒ Unhealthy naming it; a congested connection ⇒ Degraded naming it (GPUd reports it as
// a Critical event only and stays Healthy); no FUSE ⇒ Healthy "no FUSE connections".
CheckResult evaluate_fuse(const Result<host::FuseConnections>& snapshot);

// The event recorded when a connection becomes congested.
Event fuse_congestion_event(const host::FuseConnection& c, TimePoint now);

class FuseComponent : public Component {
 public:
  explicit FuseComponent(const ComponentContext& ctx);

  std::string_view name() const override { return "fuse"; }
  CheckResult check() override;

 private:
  host::HostFs fs_;
  std::mutex mu_;
  std::set<std::string> congested_;  // connection ids congested at the last check
};

}  // namespace gpud::components
