#include "core/registry.h"

#include <algorithm>

namespace gpud {

bool component_enabled(std::string_view name, const std::vector<std::string>& selection) {
  bool any_allow = false;
  bool allowed = false;
  for (const auto& raw : selection) {
    std::string_view s = raw;
    if (s.empty()) continue;
    if (s == "*" || s == "all") {
      any_allow = true;
      allowed = true;
      continue;
    }
    if (s.front() == '-') {
      if (s.substr(1) == name) return false;
      continue;
    }
    any_allow = true;
    if (s == name) allowed = true;
  }
  return !any_allow || allowed;
}

Result<void> Registry::add(std::unique_ptr<Component> c) {
  if (!c) return make_error("null component");
  std::unique_lock lock(mu_);
  auto pos = std::lower_bound(components_.begin(), components_.end(), c->name(),
                              [](const auto& a, std::string_view n) { return a->name() < n; });
  if (pos != components_.end() && (*pos)->name() == c->name())
    return make_error("component " + std::string(c->name()) + " registered twice");
  components_.insert(pos, std::move(c));
  return {};
}

Result<void> Registry::retire(std::string_view name) {
  std::unique_lock lock(mu_);
  auto pos = std::lower_bound(components_.begin(), components_.end(), name,
                              [](const auto& a, std::string_view n) { return a->name() < n; });
  if (pos == components_.end() || (*pos)->name() != name)
    return make_error("component not found: " + std::string(name), 404);
  retired_.push_back(std::move(*pos));
  components_.erase(pos);
  return {};
}

Component* Registry::find(std::string_view name) const {
  std::shared_lock lock(mu_);
  auto pos = std::lower_bound(components_.begin(), components_.end(), name,
                              [](const auto& a, std::string_view n) { return a->name() < n; });
  if (pos != components_.end() && (*pos)->name() == name) return pos->get();
  return nullptr;
}

std::vector<Component*> Registry::all() const {
  std::shared_lock lock(mu_);
  std::vector<Component*> out;
  for (const auto& c : components_) out.push_back(c.get());
  return out;
}

std::vector<Component*> Registry::supported() const {
  std::shared_lock lock(mu_);
  std::vector<Component*> out;
  for (const auto& c : components_)
    if (c->supported()) out.push_back(c.get());
  return out;
}

std::vector<std::string> Registry::names() const {
  std::shared_lock lock(mu_);
  std::vector<std::string> out;
  for (const auto& c : components_) out.emplace_back(c->name());
  return out;
}

}  // namespace gpud
