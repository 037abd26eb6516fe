#include "components/registry.h"

#include <gtest/gtest.h>

namespace gpud::components {
namespace {

// A component header that included core/component.h instead of components/component.h would
// derive its class from core's Component in its own .cpp and from this layer's in registry.cpp.
// A constructor defined in the .cpp then fails to link (its parameter type differs); one defined
// in the header links, and the cast below fails when the class's vtable comes from a .cpp that saw
// core's base.
TEST(Registry, EveryComponentDerivesFromTheComponentsLayerComponent) {
  Config config;
  MetricRegistry metrics;
  ComponentContext ctx;
  ctx.config = &config;
  ctx.metrics = &metrics;
  Registry registry;
  ASSERT_TRUE(register_all(registry, ctx));
  EXPECT_EQ(registry.names(), known_names());
  for (gpud::Component* c : registry.all())
    EXPECT_NE(dynamic_cast<Component*>(c), nullptr) << c->name();
}

}  // namespace
}  // namespace gpud::components
