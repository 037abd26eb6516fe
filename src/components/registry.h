// The one explicit list of every component gpud has (no static-init self-registration).
#pragma once

#include "core/component.h"
#include "core/registry.h"

namespace gpud::components {

// Adds every component enabled by ctx.config->components to the registry.
Result<void> register_all(Registry& registry, const ComponentContext& ctx);
// Every component name gpud knows, sorted (for validating --components).
std::vector<std::string> known_names();

}  // namespace gpud::components
