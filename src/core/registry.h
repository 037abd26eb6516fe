// Registry: the one list of components this process runs, in name order.
#pragma once

#include <memory>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <vector>

#include "core/component.h"
#include "core/result.h"

namespace gpud {

// Whether a component is enabled by a --components list: empty, "*" or "all" enables all; plain
// names form an allow-list; "-name" entries exclude (alone they mean "all but these").
bool component_enabled(std::string_view name, const std::vector<std::string>& selection);

// Safe to read from any thread while a component is added or retired. A retired component leaves
// every list but is kept alive until the registry is destroyed, so a pointer a scheduler worker or
// an API request took before stays valid.
class Registry {
 public:
  Result<void> add(std::unique_ptr<Component> c);  // error on duplicate name
  // Removes it from the lists (find, all, names); the object stays alive. Error when not found.
  Result<void> retire(std::string_view name);
  Component* find(std::string_view name) const;
  std::vector<Component*> all() const;        // sorted by name
  std::vector<Component*> supported() const;  // sorted by name, supported() only
  std::vector<std::string> names() const;     // all, sorted

 private:
  mutable std::shared_mutex mu_;
  std::vector<std::unique_ptr<Component>> components_;  // kept sorted by name
  std::vector<std::unique_ptr<Component>> retired_;
};

}  // namespace gpud
