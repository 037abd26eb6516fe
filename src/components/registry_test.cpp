#include "components/registry.h"

#include <gtest/gtest.h>

#include <algorithm>

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

// A scan checks the container runtimes before the components that read what they list.
TEST(Registry, ContainerRuntimesAreCheckedFirst) {
  Config config;
  MetricRegistry metrics;
  ComponentContext ctx;
  ctx.config = &config;
  ctx.metrics = &metrics;
  Registry registry;
  ASSERT_TRUE(register_all(registry, ctx));
  auto ordered = check_order(registry.all());
  ASSERT_EQ(ordered.size(), registry.all().size());
  auto runtime = [](const gpud::Component* c) {
    return c->name() == "containerd" || c->name() == "docker" || c->name() == "kubelet";
  };
  EXPECT_TRUE(std::is_partitioned(ordered.begin(), ordered.end(), runtime));
  EXPECT_TRUE(runtime(ordered.front()));
  // The rest keep their (name) order.
  std::vector<gpud::Component*> rest;
  for (gpud::Component* c : registry.all())
    if (!runtime(c)) rest.push_back(c);
  EXPECT_TRUE(std::equal(rest.begin(), rest.end(), ordered.end() - rest.size()));
}

// Only the Xid rules get the hook that traces a line's pid to its container.
TEST(Registry, XidRulesAnnotateTheirEvents) {
  Config config;
  MetricRegistry metrics;
  ComponentContext ctx;
  ctx.config = &config;
  ctx.metrics = &metrics;
  Registry registry;
  ASSERT_TRUE(register_all(registry, ctx));
  int annotated = 0;
  for (const kmsg::ComponentRules& r : kernel_log_rules(registry)) {
    if (!r.annotate) continue;
    ++annotated;
    EXPECT_EQ(r.component, "accelerator-nvidia-error-xid");
  }
  EXPECT_EQ(annotated, 1);
}

}  // namespace
}  // namespace gpud::components
