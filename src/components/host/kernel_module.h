// KernelModuleComponent ("kernel-module"): the kernel modules the operator requires
// (--kernel-modules) must be loaded (/proc/modules).
#pragma once

#include <string>
#include <vector>

#include "components/component.h"
#include "host/host_fs.h"

namespace gpud::components {

// The required modules absent from loaded, in required order; '-' and '_' compare equal.
std::vector<std::string> missing_kernel_modules(const std::vector<std::string>& required,
                                                const std::vector<std::string>& loaded);

class KernelModuleComponent : public Component {
 public:
  explicit KernelModuleComponent(const ComponentContext& ctx);

  std::string_view name() const override { return "kernel-module"; }
  CheckResult check() override;

 private:
  host::HostFs fs_;
};

}  // namespace gpud::components
