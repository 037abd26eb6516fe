// PowerSupplyComponent ("power-supply"): the host's power supplies (/sys/class/power_supply): their
// type, whether they are online, their status and capacity; a supply present but offline is
// Degraded.
#pragma once

#include <nlohmann/json.hpp>

#include "components/component.h"
#include "host/host_fs.h"
#include "host/power_supply.h"

namespace gpud::components {

nlohmann::json to_json(const host::PowerSupplies& s);

// The rule: the class directory unreadable, or a supply whose type is missing or whose values are
// garbled ⇒ Unhealthy naming it; a supply present (no `present` attribute counts as present) with
// `online` 0 ⇒ Degraded naming it; no supplies ⇒ Healthy "no power supplies".
CheckResult evaluate_power_supply(const Result<host::PowerSupplies>& snapshot);

class PowerSupplyComponent : public Component {
 public:
  explicit PowerSupplyComponent(const ComponentContext& ctx);

  std::string_view name() const override { return "power-supply"; }
  CheckResult check() override;

 private:
  host::HostFs fs_;
};

}  // namespace gpud::components
