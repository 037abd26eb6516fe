#include "core/component.h"

#include "core/log.h"

namespace gpud {

std::vector<std::string> Component::tags() const { return {std::string(name())}; }

Result<std::vector<Event>> Component::events(TimePoint since, TimePoint until) const {
  if (ctx_.events == nullptr) return std::vector<Event>{};
  return ctx_.events->query(name(), since, until);
}

Result<void> Component::set_healthy(const Acknowledgement& ack) {
  if (!can_set_healthy())
    return make_error("component " + std::string(name()) + " does not support set-healthy", 400);
  if (ctx_.events == nullptr) return {};
  auto r = ctx_.events->acknowledge(name(), TimePoint::max(), ack);
  if (!r) return r.error();
  return {};
}

void Component::record(Event e) const {
  if (ctx_.events == nullptr) return;
  if (e.component.empty()) e.component = std::string(name());
  auto r = ctx_.events->insert(e);
  if (!r) logger(name())->warn("failed to record event {}: {}", e.name, r.error().message);
}

}  // namespace gpud
