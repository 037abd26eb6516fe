// Registry: the one list of components this process runs, in name order.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/component.h"
#include "core/result.h"

namespace gpud {

// Whether a component is enabled by a --components list: empty, "*" or "all" enables all; plain
// names form an allow-list; "-name" entries exclude (alone they mean "all but these").
bool component_enabled(std::string_view name, const std::vector<std::string>& selection);

class Registry {
 public:
  Result<void> add(std::unique_ptr<Component> c);  // error on duplicate name
  Component* find(std::string_view name) const;
  std::vector<Component*> all() const;        // sorted by name
  std::vector<Component*> supported() const;  // sorted by name, supported() only
  std::vector<std::string> names() const;     // all, sorted

 private:
  std::vector<std::unique_ptr<Component>> components_;  // kept sorted by name
};

}  // namespace gpud
