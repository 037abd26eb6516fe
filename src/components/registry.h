// The one explicit list of every component gpud has (no static-init self-registration).
#pragma once

#include "components/component.h"
#include "core/registry.h"
#include "kmsg/rules.h"

namespace gpud::components {

// Adds every component enabled by ctx.config->components to the registry.
Result<void> register_all(Registry& registry, const ComponentContext& ctx);
// Every component name gpud knows, sorted (for validating --components).
std::vector<std::string> known_names();
// The kernel-log rules of the components in `registry`: what the event pipeline is built from.
std::vector<kmsg::ComponentRules> kernel_log_rules(const Registry& registry);
// The components whose check fills what the others read: the container runtimes ("containerd",
// "docker", "kubelet") list the containers the GPU processes and Xid lines are traced to. The
// daemon checks them first (Scheduler::start's `first`).
std::vector<std::string> checked_first();
// Components in the order a one-shot check of them all (gpud scan) runs them: checked_first(),
// then the rest in their given order.
std::vector<gpud::Component*> check_order(std::vector<gpud::Component*> components);
// Every component's kernel-log rules, registered or not (gpud scan's benchmarks, tests).
std::vector<kmsg::ComponentRules> all_kernel_log_rules();

}  // namespace gpud::components
